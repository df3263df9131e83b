//! The headers of the small ops, encoded and decoded by hand.
//!
//! A put, get, atomic, notify or barrier request, and an ack, value or get
//! reply, is a header whose body is a flat message of varint fields — no
//! region, no checked-mode stamp. prost spends more on such a header than
//! the target spends applying the op (docs/PERFORMANCE.md, "Why the code
//! is shaped so"). Here those shapes are written as
//! protobuf writes them — the same bytes prost produces, zero fields left
//! out, fields in number order — and read back when they arrive in that
//! form. Anything else (another body, a region, a stamp, a field repeated
//! or out of order, a value too wide for its field) is left to prost, so
//! what a header means never depends on which path decoded it.

use crate::v1::header::Body;
use crate::v1::{
    Ack, BarrierSignal, GetReply, Header, PeerAtomicAdd, PeerCellOp, PeerCompareSwap, PeerFetchAdd,
    PeerGet, PeerNotify, PeerPut, ValueReply,
};

/// The most bytes a fast header takes: the id, a two-byte body tag, its
/// length and five ten-byte varint fields with their tags.
pub(crate) const MAX_LEN: usize = 11 + 2 + 1 + 5 * 11;

/// At most five varint fields, by field number (1-based); 0 is omitted.
type Fields = [u64; 5];

/// The body's field number in `Header` and its varint fields, if it has
/// the flat shape.
fn flat(body: &Body) -> Option<(u8, Fields, usize)> {
    // int32 fields (enums, a notify's value) are written sign-extended, as
    // protobuf writes a negative int32.
    let i32f = |v: i32| i64::from(v) as u64;
    Some(match body {
        Body::Put(PeerPut {
            window,
            offset,
            region: None,
        }) => (3, [u64::from(*window), *offset, 0, 0, 0], 2),
        Body::Get(PeerGet {
            window,
            offset,
            len,
            region: None,
        }) => (4, [u64::from(*window), *offset, *len, 0, 0], 3),
        Body::AtomicAdd(PeerAtomicAdd {
            window,
            offset,
            dtype,
            region: None,
        }) => (5, [u64::from(*window), *offset, i32f(*dtype), 0, 0], 3),
        Body::FetchAdd(PeerFetchAdd {
            window,
            offset,
            dtype,
            value,
        }) => (
            6,
            [u64::from(*window), *offset, i32f(*dtype), *value as u64, 0],
            4,
        ),
        Body::CompareSwap(PeerCompareSwap {
            window,
            offset,
            dtype,
            expected,
            desired,
        }) => (
            7,
            [
                u64::from(*window),
                *offset,
                i32f(*dtype),
                *expected as u64,
                *desired as u64,
            ],
            5,
        ),
        Body::Notify(PeerNotify {
            window,
            offset,
            value,
            op,
        }) => (
            8,
            [u64::from(*window), *offset, i32f(*value), i32f(*op), 0],
            4,
        ),
        Body::Barrier(BarrierSignal { epoch, round }) => {
            (9, [*epoch, u64::from(*round), 0, 0, 0], 2)
        }
        Body::Swap(c) => cell(10, c),
        Body::Fetch(c) => cell(11, c),
        Body::Set(c) => cell(12, c),
        Body::AtomicBitwise(c) => cell(13, c),
        Body::FetchBitwise(c) => cell(14, c),
        Body::Ack(Ack { first }) => (16, [*first, 0, 0, 0, 0], 1),
        Body::GetReply(GetReply {}) => (17, [0; 5], 0),
        Body::Value(ValueReply { previous }) => (18, [*previous as u64, 0, 0, 0, 0], 1),
        // 2-D requests, put-with-signal (six fields), the handshake and
        // errors: the generic encoder's.
        Body::Put(_)
        | Body::Get(_)
        | Body::AtomicAdd(_)
        | Body::PutSignal(_)
        | Body::Hello(_)
        | Body::Error(_) => {
            return None;
        }
    })
}

/// A single-cell atomic's flat form: body `field`, its five fields.
fn cell(field: u8, c: &PeerCellOp) -> (u8, Fields, usize) {
    let i32f = |v: i32| i64::from(v) as u64;
    let v = [
        u64::from(c.window),
        c.offset,
        i32f(c.dtype),
        c.value as u64,
        i32f(c.bit_op),
    ];
    (field, v, 5)
}

pub(super) fn put_varint(out: &mut [u8], at: &mut usize, mut v: u64) {
    while v >= 0x80 {
        out[*at] = (v as u8) | 0x80;
        v >>= 7;
        *at += 1;
    }
    out[*at] = v as u8;
    *at += 1;
}

/// Appends a whole frame head — the prefix, then a header of `id` and a
/// body numbered `field` whose varint fields are `values` (field 1 first;
/// zeros left out, as prost does) — for a payload of `payload_len` bytes:
/// the bytes [`super::encode_head`] writes for that header. Prefix, header
/// and body are written into one stack buffer and leave in one copy. For
/// the hand-written frames of the small-op path (`store`, `ack`): at most
/// three fields, so the body (at most 33 bytes) has a one-byte length,
/// written after it.
/// (`N` is a constant, so the loop over the fields unrolls, as a slice's
/// would not: the small-op path counts instructions.)
#[inline]
pub(super) fn encode_flat_head<const N: usize>(
    id: u64,
    field: u64,
    values: [u64; N],
    payload_len: usize,
    dst: &mut bytes::BytesMut,
) {
    const { assert!(N <= 3, "a one-byte body length") };
    // The stack buffer fits the fields: zeroing room for a third field
    // shows on every put and ack. `N` is a
    // constant, so one branch remains.
    if N <= 2 {
        let mut frame = [0u8; super::PREFIX_LEN + 11 + 2 + 1 + 2 * 11];
        let n = fill_flat_head(&mut frame, id, field, values, payload_len);
        dst.extend_from_slice(&frame[..n]);
    } else {
        let mut frame = [0u8; super::PREFIX_LEN + 11 + 2 + 1 + 3 * 11];
        let n = fill_flat_head(&mut frame, id, field, values, payload_len);
        dst.extend_from_slice(&frame[..n]);
    }
}

/// Writes [`encode_flat_head`]'s bytes into `frame`; their length.
#[inline(always)]
fn fill_flat_head<const N: usize>(
    frame: &mut [u8],
    id: u64,
    field: u64,
    values: [u64; N],
    payload_len: usize,
) -> usize {
    let mut at = super::PREFIX_LEN;
    if id != 0 {
        put_varint(frame, &mut at, 1 << 3);
        put_varint(frame, &mut at, id);
    }
    put_varint(frame, &mut at, (field << 3) | 2);
    let len_at = at;
    at += 1;
    for (i, v) in values.into_iter().enumerate() {
        if v != 0 {
            put_varint(frame, &mut at, (i as u64 + 1) << 3);
            put_varint(frame, &mut at, v);
        }
    }
    frame[len_at] = (at - len_at - 1) as u8;
    let header_len = (at - super::PREFIX_LEN) as u32;
    let payload_len = u32::try_from(payload_len).unwrap_or(u32::MAX);
    frame[..4].copy_from_slice(&header_len.to_le_bytes());
    frame[4..8].copy_from_slice(&payload_len.to_le_bytes());
    at
}

/// `header` as protobuf bytes in `out` (their length), if it has a fast
/// shape.
pub(crate) fn encode(header: &Header, out: &mut [u8; MAX_LEN]) -> Option<usize> {
    if header.checked.is_some() {
        return None;
    }
    let (field, values, n) = flat(header.body.as_ref()?)?;
    // The body first, behind room for the header's id, tag and length.
    let mut body = [0u8; MAX_LEN];
    let mut len = 0;
    for (i, v) in values[..n].iter().enumerate() {
        if *v != 0 {
            put_varint(&mut body, &mut len, (i as u64 + 1) << 3);
            put_varint(&mut body, &mut len, *v);
        }
    }
    let mut at = 0;
    if header.id != 0 {
        put_varint(out, &mut at, 1 << 3);
        put_varint(out, &mut at, header.id);
    }
    put_varint(out, &mut at, (u64::from(field) << 3) | 2);
    put_varint(out, &mut at, len as u64);
    out[at..at + len].copy_from_slice(&body[..len]);
    Some(at + len)
}

/// Reads a varint; `None` if it runs past the end or past ten bytes (or
/// overflows 64 bits), which prost then judges.
pub(super) fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    // Tags, lengths, windows and small values: one byte.
    let first = *bytes.get(*at)?;
    if first < 0x80 {
        *at += 1;
        return Some(u64::from(first));
    }
    // Ids past 127 and most offsets of a small window: two bytes.
    if let Some(&second) = bytes.get(*at + 1)
        && second < 0x80
    {
        *at += 2;
        return Some(u64::from(first & 0x7f) | u64::from(second) << 7);
    }
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// `bytes` as a header, if they are a fast shape written as [`encode`]
/// writes it; `None` otherwise (prost decodes them).
pub(crate) fn decode(bytes: &[u8]) -> Option<Header> {
    let (id, field, values, last) = decode_flat(bytes, [])?;
    body(field, values, last).map(|body| Header {
        id,
        body: Some(body),
        checked: None,
    })
}

/// A header in the flat shape, taken apart: its id, its body's field
/// number, the body's varint fields and the highest field number present.
/// `None` if the bytes are not in that shape, or (with `only` not empty)
/// if the body is none of those fields — found before the body is parsed.
/// (`N` is a constant, so the test unrolls: a slice cost an ack ~6
/// instructions.)
pub(super) fn decode_flat<const N: usize>(
    bytes: &[u8],
    only: [u64; N],
) -> Option<(u64, u64, Fields, u64)> {
    let mut at = 0;
    let mut tag = varint(bytes, &mut at)?;
    let mut id = 0;
    if tag == 1 << 3 {
        id = varint(bytes, &mut at)?;
        tag = varint(bytes, &mut at)?;
    }
    if tag & 7 != 2 {
        return None;
    }
    let field = tag >> 3;
    if N > 0 && !only.contains(&field) {
        return None;
    }
    let len = usize::try_from(varint(bytes, &mut at)?).ok()?;
    // The body must end the header exactly.
    if bytes.len().checked_sub(at)? != len {
        return None;
    }
    let inner = &bytes[at..];
    let mut values: Fields = [0; 5];
    let (mut pos, mut last) = (0, 0);
    while pos < inner.len() {
        let t = varint(inner, &mut pos)?;
        let number = t >> 3;
        // Varint fields in increasing order, each once.
        if t & 7 != 0 || number <= last || number > 5 {
            return None;
        }
        values[number as usize - 1] = varint(inner, &mut pos)?;
        last = number;
    }
    Some((id, field, values, last))
}

/// The body numbered `field` with `values`; `None` if it is not a flat
/// one, has a field it does not know, or a value too wide for its field.
fn body(field: u64, v: Fields, last: u64) -> Option<Body> {
    let u32f = |x: u64| u32::try_from(x).ok();
    // prost reads an int32 as the low 32 bits of the varint.
    let i32f = |x: u64| x as i32;
    let most = |n: u64| (last <= n).then_some(());
    Some(match field {
        3 => {
            most(2)?;
            Body::Put(PeerPut {
                window: u32f(v[0])?,
                offset: v[1],
                region: None,
            })
        }
        4 => {
            most(3)?;
            Body::Get(PeerGet {
                window: u32f(v[0])?,
                offset: v[1],
                len: v[2],
                region: None,
            })
        }
        5 => {
            most(3)?;
            Body::AtomicAdd(PeerAtomicAdd {
                window: u32f(v[0])?,
                offset: v[1],
                dtype: i32f(v[2]),
                region: None,
            })
        }
        6 => {
            most(4)?;
            Body::FetchAdd(PeerFetchAdd {
                window: u32f(v[0])?,
                offset: v[1],
                dtype: i32f(v[2]),
                value: v[3] as i64,
            })
        }
        7 => Body::CompareSwap(PeerCompareSwap {
            window: u32f(v[0])?,
            offset: v[1],
            dtype: i32f(v[2]),
            expected: v[3] as i64,
            desired: v[4] as i64,
        }),
        8 => {
            most(4)?;
            Body::Notify(PeerNotify {
                window: u32f(v[0])?,
                offset: v[1],
                value: i32f(v[2]),
                op: i32f(v[3]),
            })
        }
        9 => {
            most(2)?;
            Body::Barrier(BarrierSignal {
                epoch: v[0],
                round: u32f(v[1])?,
            })
        }
        16 => {
            most(1)?;
            Body::Ack(Ack { first: v[0] })
        }
        17 => {
            most(0)?;
            Body::GetReply(GetReply {})
        }
        10..=14 => {
            let c = PeerCellOp {
                window: u32f(v[0])?,
                offset: v[1],
                dtype: i32f(v[2]),
                value: v[3] as i64,
                bit_op: i32f(v[4]),
            };
            match field {
                10 => Body::Swap(c),
                11 => Body::Fetch(c),
                12 => Body::Set(c),
                13 => Body::AtomicBitwise(c),
                _ => Body::FetchBitwise(c),
            }
        }
        18 => {
            most(1)?;
            Body::Value(ValueReply {
                previous: v[0] as i64,
            })
        }
        _ => return None,
    })
}

#[cfg(test)]
pub(super) mod tests;
