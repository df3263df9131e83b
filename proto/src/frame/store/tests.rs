#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::frame::fast::tests::{frame, random_header};
use crate::frame::test_rng::Rng;
use crate::frame::{PREAMBLE, encode_head};
use crate::v1::header::Body;
use crate::v1::{CheckedStamp, Header, PeerGet, PeerPut, Region};
use prost::Message;

fn put(id: u64, window: u32, offset: u64) -> Header {
    Header {
        id,
        body: Some(Body::Put(PeerPut {
            window,
            offset,
            region: None,
        })),
        checked: None,
    }
}

#[test]
fn a_put_head_is_the_bytes_of_the_generic_encoder() {
    let mut r = Rng(0x9a7);
    for _ in 0..200_000 {
        let (id, window, offset) = (r.value(), r.value() as u32, r.value());
        let len = (r.value() % (1 << 24)) as usize;
        let mut ours = BytesMut::new();
        encode_put_head(id, window, offset, len, &mut ours);
        let mut generic = BytesMut::new();
        encode_head(&put(id, window, offset), len, &mut generic);
        assert_eq!(ours, generic, "put #{id} window {window} offset {offset}");
    }
}

#[test]
fn every_head_the_put_encoder_writes_reads_back_byte_by_byte() {
    let mut r = Rng(0x5ead);
    for i in 0..100_000u64 {
        // `value` is zero a quarter of the time: a field left out.
        let id = r.value().max(1);
        let (window, offset) = (r.value() as u32, r.value());
        let mut head = BytesMut::new();
        encode_put_head(id, window, offset, (i % 4096) as usize, &mut head);
        let header = &head[PREFIX_LEN..];
        assert_eq!(
            decode_put_head(header),
            Some((id, window, offset)),
            "{header:02x?}"
        );
    }
}

#[test]
fn a_header_reads_as_a_put_exactly_when_the_fast_decoder_reads_a_plain_put() {
    let mut r = Rng(0xb0d1e5);
    let (mut puts, mut others) = (0, 0);
    for i in 0..300_000 {
        let mut bytes = random_header(&mut r).encode_to_vec();
        if i % 2 == 1 {
            r.mutate(&mut bytes);
        }
        let want = match crate::frame::fast::decode(&bytes) {
            Some(Header {
                id,
                body:
                    Some(Body::Put(PeerPut {
                        window,
                        offset,
                        region: None,
                    })),
                checked: None,
            }) => Some((id, window, offset)),
            _ => None,
        };
        assert_eq!(decode_put(&bytes), want, "case {i}: {bytes:02x?}");
        match want {
            Some(_) => puts += 1,
            None => others += 1,
        }
    }
    assert!(puts > 10_000 && others > 100_000, "{puts} {others}");
}

#[test]
fn peek_put_finds_a_whole_plain_put_and_takes_nothing() {
    let d = Decoder::new(1 << 20);
    let buf = frame(&put(7, 2, 40), &[1, 2, 3, 4, 5, 6, 7, 8]);
    let p = d.peek_put(&buf).expect("a whole put");
    assert_eq!((p.id, p.window, p.offset, p.payload_len), (7, 2, 40, 8));
    assert_eq!(&buf[p.head_len..], &[1, 2, 3, 4, 5, 6, 7, 8]);
    // Every shorter buffer is not yet a whole frame.
    for n in 0..buf.len() {
        assert_eq!(d.peek_put(&buf[..n]), None, "{n} bytes");
    }
}

#[test]
fn peek_put_leaves_every_other_frame_to_the_generic_decoder() {
    let d = Decoder::new(1 << 20);
    let region = Header {
        body: Some(Body::Put(PeerPut {
            window: 1,
            offset: 0,
            region: Some(Region {
                rows: 1,
                cols: 8,
                row_stride: 8,
                dtype: 1,
            }),
        })),
        ..put(3, 1, 0)
    };
    let stamped = Header {
        checked: Some(CheckedStamp {
            clock: vec![1],
            barriers: 0,
        }),
        ..put(4, 1, 0)
    };
    let get = Header {
        id: 5,
        body: Some(Body::Get(PeerGet {
            window: 1,
            offset: 0,
            len: 8,
            region: None,
        })),
        checked: None,
    };
    for h in [region, stamped, get] {
        let mut buf = frame(&h, &[0; 8]);
        assert_eq!(d.peek_put(&buf), None, "{h:?}");
        let (got, _) = Decoder::new(1 << 20)
            .decode_head(&mut buf)
            .unwrap()
            .unwrap();
        assert_eq!(got, h);
    }
}

#[test]
fn peek_put_leaves_limits_and_the_preamble_to_the_generic_decoder() {
    // Over the payload limit: the generic decoder names the error.
    let mut big = frame(&put(1, 0, 0), &[0; 64]);
    let mut d = Decoder::new(32);
    assert_eq!(d.peek_put(&big), None);
    assert!(d.decode_head(&mut big).is_err());
    // On the accepting side, nothing before the preamble is checked.
    let mut buf = BytesMut::from(&PREAMBLE[..]);
    buf.extend_from_slice(&frame(&put(1, 0, 0), &[9]));
    let mut d = Decoder::expecting_preamble(1 << 20);
    assert_eq!(d.peek_put(&buf), None);
    let (h, n) = d.decode_head(&mut buf).unwrap().unwrap();
    assert_eq!((h, n), (put(1, 0, 0), 1));
}
