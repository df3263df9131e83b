#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::frame::fast::tests::{frame, random_header};
use crate::frame::test_rng::Rng;
use crate::frame::{MAX_HEADER_LEN, PREAMBLE};
use crate::v1::header::Body;
use crate::v1::{Ack, CheckedStamp, Header, ValueReply};
use prost::Message;

use crate::frame::ack_header as ack;

#[test]
fn an_ack_head_is_the_bytes_of_the_generic_encoder() {
    let mut r = Rng(0xac4);
    let edges = [0, 1, 127, 128, 16_383, 16_384, u64::MAX];
    let mut cases: Vec<(u64, u64)> = edges
        .iter()
        .flat_map(|&a| edges.iter().map(move |&b| (a, b)))
        .collect();
    cases.extend((0..200_000).map(|_| (r.value(), r.value())));
    for (id, first) in cases {
        let mut ours = BytesMut::new();
        encode_ack_head(id, first, &mut ours);
        assert_eq!(ours, frame(&ack(id, first), &[]), "ack #{id} from {first}");
    }
}

#[test]
fn a_header_reads_as_an_ack_exactly_when_the_fast_decoder_reads_an_ack() {
    let mut r = Rng(0xacced);
    let (mut acks, mut others) = (0, 0);
    for i in 0..300_000 {
        let mut bytes = if i % 4 == 0 {
            ack(r.value(), r.value()).encode_to_vec()
        } else {
            random_header(&mut r).encode_to_vec()
        };
        if i % 2 == 1 {
            r.mutate(&mut bytes);
        }
        let want = match crate::frame::fast::decode(&bytes) {
            Some(Header {
                id,
                body: Some(Body::Ack(Ack { first })),
                checked: None,
            }) => Some((id, first)),
            _ => None,
        };
        assert_eq!(decode_ack(&bytes), want, "case {i}: {bytes:02x?}");
        match want {
            Some(_) => acks += 1,
            None => others += 1,
        }
    }
    assert!(acks > 30_000 && others > 100_000, "{acks} {others}");
}

#[test]
fn peek_ack_finds_a_whole_ack_and_takes_nothing() {
    let d = Decoder::new(1 << 20);
    let mut buf = frame(&ack(9, 3), &[]);
    let a = d.peek_ack(&buf).expect("a whole ack");
    assert_eq!((a.id, a.first, a.len), (9, 3, buf.len()));
    // Every shorter buffer is not yet a whole frame.
    for n in 0..buf.len() {
        assert_eq!(d.peek_ack(&buf[..n]), None, "{n} bytes");
    }
    // What follows it is not part of it.
    buf.extend_from_slice(&frame(&ack(10, 0), &[]));
    assert_eq!(d.peek_ack(&buf).map(|a| (a.id, a.len)), Some((9, a.len)));
    let next = d.peek_ack(&buf[a.len..]).expect("the second ack");
    assert_eq!((next.id, next.first), (10, 0));
}

#[test]
fn peek_ack_leaves_every_other_frame_to_the_generic_decoder() {
    let d = Decoder::new(1 << 20);
    let stamped = Header {
        checked: Some(CheckedStamp {
            clock: vec![1],
            barriers: 0,
        }),
        ..ack(4, 0)
    };
    let value = Header {
        id: 5,
        body: Some(Body::Value(ValueReply { previous: 7 })),
        checked: None,
    };
    let cases = [(stamped, vec![]), (value, vec![]), (ack(6, 0), vec![1, 2])];
    for (h, payload) in cases {
        let mut buf = frame(&h, &payload);
        assert_eq!(d.peek_ack(&buf), None, "{h:?} with {} bytes", payload.len());
        let (got, len) = Decoder::new(1 << 20)
            .decode_head(&mut buf)
            .unwrap()
            .unwrap();
        assert_eq!((got, len), (h, payload.len()));
    }
}

#[test]
fn peek_ack_leaves_the_preamble_and_the_limits_to_the_generic_decoder() {
    // On the accepting side, nothing before the preamble is checked.
    let mut buf = BytesMut::from(&PREAMBLE[..]);
    buf.extend_from_slice(&frame(&ack(1, 0), &[]));
    let mut d = Decoder::expecting_preamble(1 << 20);
    assert_eq!(d.peek_ack(&buf), None);
    // A header over the limit is named by the generic decoder.
    let mut huge = BytesMut::new();
    huge.extend_from_slice(&((MAX_HEADER_LEN + 1) as u32).to_le_bytes());
    huge.extend_from_slice(&0u32.to_le_bytes());
    assert_eq!(d.peek_ack(&huge), None);
    let _ = d.decode_head(&mut buf).unwrap().unwrap();
    assert!(d.decode_head(&mut huge).is_err());
}
