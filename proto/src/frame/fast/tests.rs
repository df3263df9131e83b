#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::frame::test_rng::Rng;
use crate::v1::{CheckedStamp, Region};
use prost::Message;

/// `h` framed by the generic encoder, then `payload`.
pub(crate) fn frame(h: &Header, payload: &[u8]) -> bytes::BytesMut {
    let mut b = bytes::BytesMut::new();
    crate::frame::encode_head(h, payload.len(), &mut b);
    b.extend_from_slice(payload);
    b
}

pub(crate) fn random_header(r: &mut Rng) -> Header {
    let mut w = || r.value();
    let body = match w() % 12 {
        0 => Body::Put(PeerPut {
            window: w() as u32,
            offset: w(),
            region: None,
        }),
        1 => Body::Get(PeerGet {
            window: w() as u32,
            offset: w(),
            len: w(),
            region: None,
        }),
        2 => Body::AtomicAdd(PeerAtomicAdd {
            window: w() as u32,
            offset: w(),
            dtype: w() as i32,
            region: None,
        }),
        3 => Body::FetchAdd(PeerFetchAdd {
            window: w() as u32,
            offset: w(),
            dtype: w() as i32,
            value: w() as i64,
        }),
        4 => Body::CompareSwap(PeerCompareSwap {
            window: w() as u32,
            offset: w(),
            dtype: w() as i32,
            expected: w() as i64,
            desired: w() as i64,
        }),
        5 => Body::Notify(PeerNotify {
            window: w() as u32,
            offset: w(),
            value: w() as i32,
            op: w() as i32,
        }),
        6 => Body::Barrier(BarrierSignal {
            epoch: w(),
            round: w() as u32,
        }),
        7 => Body::Ack(Ack { first: w() }),
        8 => Body::GetReply(GetReply {}),
        9 => Body::Value(ValueReply {
            previous: w() as i64,
        }),
        // Shapes that are not fast.
        10 => Body::Put(PeerPut {
            window: 1,
            offset: 2,
            region: Some(Region {
                rows: w(),
                cols: 1,
                row_stride: 3,
                dtype: 1,
            }),
        }),
        _ => Body::Error(crate::v1::ErrorReply {
            code: 1,
            message: "no".into(),
        }),
    };
    Header {
        id: w(),
        body: Some(body),
        checked: (w() % 7 == 0).then(|| CheckedStamp {
            clock: vec![1, 2],
            barriers: 3,
        }),
    }
}

#[test]
fn fast_headers_are_the_bytes_prost_writes_and_read_back_the_same() {
    let mut r = Rng(0x5eed);
    let (mut fast, mut slow) = (0, 0);
    for _ in 0..200_000 {
        let h = random_header(&mut r);
        let bytes = h.encode_to_vec();
        let mut out = [0u8; MAX_LEN];
        match encode(&h, &mut out) {
            Some(n) => {
                fast += 1;
                assert_eq!(&out[..n], &bytes[..], "{h:?}");
                assert_eq!(decode(&bytes).as_ref(), Some(&h));
            }
            None => {
                slow += 1;
                assert!(decode(&bytes).is_none(), "{h:?} is not a fast shape");
            }
        }
    }
    assert!(fast > 100_000 && slow > 10_000, "{fast} {slow}");
}

#[test]
fn any_bytes_decode_as_prost_decodes_them_or_are_left_to_prost() {
    let mut r = Rng(0xfa57);
    let mut agreed = 0;
    for i in 0..300_000 {
        let mut bytes = random_header(&mut r).encode_to_vec();
        r.mutate(&mut bytes);
        if let Some(h) = decode(&bytes) {
            let p = Header::decode(&bytes[..]).expect("prost accepts what the fast path does");
            assert_eq!(h, p, "case {i}: {bytes:02x?}");
            agreed += 1;
        }
    }
    assert!(agreed > 50_000, "{agreed}");
}
