#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::frame::fast::tests::{frame, random_header};
use crate::frame::test_rng::Rng;
use crate::frame::{PREAMBLE, encode_head};
use crate::v1::header::Body;
use crate::v1::{CheckedStamp, Header, PeerAtomicAdd, PeerGet, PeerPut, Region};
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

fn add(id: u64, window: u32, offset: u64, dtype: i32) -> Header {
    Header {
        id,
        body: Some(Body::AtomicAdd(PeerAtomicAdd {
            window,
            offset,
            dtype,
            region: None,
        })),
        checked: None,
    }
}

/// A random store: a put, or an atomic add of a random wire dtype (a
/// negative one, sign-extended, included).
fn random_store(r: &mut Rng) -> Store {
    match r.next() % 3 {
        0 => Store::Put,
        1 => Store::AtomicAdd {
            dtype: (r.next() % 12) as i32,
        },
        _ => Store::AtomicAdd {
            dtype: r.value() as i32,
        },
    }
}

fn header_of(id: u64, store: Store, window: u32, offset: u64) -> Header {
    match store {
        Store::Put => put(id, window, offset),
        Store::AtomicAdd { dtype } => add(id, window, offset, dtype),
    }
}

#[test]
fn a_store_head_is_the_bytes_of_the_generic_encoder() {
    let mut r = Rng(0x9a7);
    for _ in 0..200_000 {
        let (id, window, offset) = (r.value(), r.value() as u32, r.value());
        let store = random_store(&mut r);
        let len = (r.value() % (1 << 24)) as usize;
        let mut ours = BytesMut::new();
        encode_store_head(id, store, window, offset, len, &mut ours);
        let mut generic = BytesMut::new();
        encode_head(&header_of(id, store, window, offset), len, &mut generic);
        assert_eq!(
            ours, generic,
            "{store:?} #{id} window {window} offset {offset}"
        );
    }
}

#[test]
fn every_head_the_store_encoder_writes_reads_back_byte_by_byte() {
    let mut r = Rng(0x5ead);
    for i in 0..100_000u64 {
        // `value` is zero a quarter of the time: a field left out.
        let id = r.value().max(1);
        let (window, offset) = (r.value() as u32, r.value());
        let store = random_store(&mut r);
        let mut head = BytesMut::new();
        encode_store_head(id, store, window, offset, (i % 4096) as usize, &mut head);
        let header = &head[PREFIX_LEN..];
        // A negative dtype takes ten bytes: past the one-byte body length
        // the byte-by-byte reader expects, so `decode_flat` reads it.
        let want = Some((id, store, window, offset));
        match store {
            Store::AtomicAdd { dtype } if dtype < 0 => {
                assert_eq!(decode_store(header), want, "{header:02x?}")
            }
            _ => assert_eq!(decode_store_head(header), want, "{header:02x?}"),
        }
    }
}

#[test]
fn a_header_reads_as_a_store_exactly_when_the_fast_decoder_reads_a_plain_store() {
    let mut r = Rng(0xb0d1e5);
    let (mut puts, mut adds, mut others) = (0, 0, 0);
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
            }) => Some((id, Store::Put, window, offset)),
            Some(Header {
                id,
                body:
                    Some(Body::AtomicAdd(PeerAtomicAdd {
                        window,
                        offset,
                        dtype,
                        region: None,
                    })),
                checked: None,
            }) => Some((id, Store::AtomicAdd { dtype }, window, offset)),
            _ => None,
        };
        assert_eq!(decode_store(&bytes), want, "case {i}: {bytes:02x?}");
        match want {
            Some((_, Store::Put, ..)) => puts += 1,
            Some(_) => adds += 1,
            None => others += 1,
        }
    }
    assert!(
        puts > 10_000 && adds > 5_000 && others > 100_000,
        "{puts} {adds} {others}"
    );
}

#[test]
fn peek_store_finds_a_whole_plain_put_or_atomic_add_and_takes_nothing() {
    let d = Decoder::new(1 << 20);
    let int64 = Store::AtomicAdd { dtype: 4 };
    for (h, store) in [(put(7, 2, 40), Store::Put), (add(7, 2, 40, 4), int64)] {
        let buf = frame(&h, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let p = d.peek_store(&buf).expect("a whole store");
        assert_eq!(
            (p.id, p.store, p.window, p.offset, p.payload_len),
            (7, store, 2, 40, 8)
        );
        assert_eq!(&buf[p.head_len..], &[1, 2, 3, 4, 5, 6, 7, 8]);
        // Every shorter buffer is not yet a whole frame.
        for n in 0..buf.len() {
            assert_eq!(d.peek_store(&buf[..n]), None, "{n} bytes");
        }
    }
}

#[test]
fn peek_store_leaves_every_other_frame_to_the_generic_decoder() {
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
    let add_region = Header {
        body: Some(Body::AtomicAdd(PeerAtomicAdd {
            window: 1,
            offset: 0,
            dtype: 4,
            region: Some(Region {
                rows: 1,
                cols: 1,
                row_stride: 1,
                dtype: 4,
            }),
        })),
        ..add(6, 1, 0, 4)
    };
    for h in [region, stamped, get, add_region] {
        let mut buf = frame(&h, &[0; 8]);
        assert_eq!(d.peek_store(&buf), None, "{h:?}");
        let (got, _) = Decoder::new(1 << 20)
            .decode_head(&mut buf)
            .unwrap()
            .unwrap();
        assert_eq!(got, h);
    }
}

#[test]
fn peek_store_leaves_limits_and_the_preamble_to_the_generic_decoder() {
    // Over the payload limit: the generic decoder names the error.
    let mut big = frame(&put(1, 0, 0), &[0; 64]);
    let mut d = Decoder::new(32);
    assert_eq!(d.peek_store(&big), None);
    assert!(d.decode_head(&mut big).is_err());
    // On the accepting side, nothing before the preamble is checked.
    let mut buf = BytesMut::from(&PREAMBLE[..]);
    buf.extend_from_slice(&frame(&put(1, 0, 0), &[9]));
    let mut d = Decoder::expecting_preamble(1 << 20);
    assert_eq!(d.peek_store(&buf), None);
    let (h, n) = d.decode_head(&mut buf).unwrap().unwrap();
    assert_eq!((h, n), (put(1, 0, 0), 1));
}
