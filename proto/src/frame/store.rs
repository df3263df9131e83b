//! The plain put's own frame path: written and read without a [`Header`].
//!
//! A window of 8-byte puts is the message-rate benchmark, and the kernels
//! that scatter small stores live on it. Building a `Header` for each put,
//! matching its body and moving it through the generic decoder cost more
//! than the put itself (callgrind: ~450 instructions of a put's ~970 at the
//! target went to taking its header off the stream). So a put without a
//! region or a checked-mode stamp is encoded straight from its fields, and
//! a frame that is such a put, whole in the buffer, is read straight into
//! them. The bytes are exactly those of [`super::encode_head`] (so of
//! prost); a frame that is anything else — or a put in another shape, or
//! over a limit — is left to the generic [`super::Decoder`], which decodes
//! it or names the error, so nothing means something else on this path.

use super::fast::{decode_flat, encode_flat_head, varint};
use super::{Decoder, MAX_HEADER_LEN, PREFIX_LEN};
use bytes::BytesMut;

/// The put's field number in `Header`.
const PUT_FIELD: u64 = 3;

/// A put frame whose header and payload are all buffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutFrame {
    /// The request's id.
    pub id: u64,
    /// The target window.
    pub window: u32,
    /// The byte offset in it.
    pub offset: u64,
    /// Bytes before the payload: the prefix and the header.
    pub head_len: usize,
    /// The payload's length.
    pub payload_len: usize,
}

/// Appends the prefix and header of a put of `payload_len` bytes at
/// `offset` of `window` — the bytes `encode_head` writes for
/// `Header { id, body: Put { window, offset, region: None }, checked: None }`.
#[inline]
pub fn encode_put_head(id: u64, window: u32, offset: u64, payload_len: usize, dst: &mut BytesMut) {
    encode_flat_head(id, PUT_FIELD, [u64::from(window), offset], payload_len, dst);
}

/// `(id, window, offset)` if `bytes` are a put header in the shape
/// [`encode_put_head`] writes — exactly when `fast::decode` reads them as
/// a plain put; `None` otherwise.
#[inline]
fn decode_put(bytes: &[u8]) -> Option<(u64, u32, u64)> {
    if let Some(put) = decode_put_head(bytes) {
        return Some(put);
    }
    // Every small op's frame is peeked first: `decode_flat` turns away a
    // header whose body is not a put's before it parses the body.
    match decode_flat(bytes, Some(PUT_FIELD))? {
        (id, PUT_FIELD, v, last) if last <= 2 => Some((id, u32::try_from(v[0]).ok()?, v[1])),
        _ => None,
    }
}

/// `(id, window, offset)` if `bytes` are exactly what [`encode_put_head`]
/// writes for a nonzero id: `08 id 1a len [08 window] [10 offset]`. The
/// shape is checked byte by byte — no loop over fields, no field table —
/// which takes a third off the target's cost of a put's header (callgrind:
/// 96 → 67 instructions); anything else (`None`) is left to `decode_flat`,
/// which reads every shape prost does. Whatever this accepts (explicit
/// zero fields and long varints included), `decode_flat` reads as the
/// same put.
fn decode_put_head(b: &[u8]) -> Option<(u64, u32, u64)> {
    const ID: u8 = 1 << 3;
    const BODY: u8 = (PUT_FIELD as u8) << 3 | 2;
    const WINDOW: u8 = 1 << 3;
    const OFFSET: u8 = 2 << 3;
    if *b.first()? != ID {
        return None;
    }
    let mut at = 1;
    let id = varint(b, &mut at)?;
    let (&tag, &len) = (b.get(at)?, b.get(at + 1)?);
    at += 2;
    // A one-byte body length, ending the header exactly.
    if tag != BODY || len >= 0x80 || b.len() - at != usize::from(len) {
        return None;
    }
    let mut window = 0;
    if b.get(at) == Some(&WINDOW) {
        at += 1;
        window = varint(b, &mut at)?;
    }
    let mut offset = 0;
    if b.get(at) == Some(&OFFSET) {
        at += 1;
        offset = varint(b, &mut at)?;
    }
    if at != b.len() {
        return None;
    }
    Some((id, u32::try_from(window).ok()?, offset))
}

impl Decoder {
    /// The length prefix at the front of `buf` — `(header_len,
    /// payload_len)` — for the fast paths: `None` before the preamble is
    /// through, with less than a prefix buffered, or with a header over
    /// the limit (the generic decoder names that error).
    pub(super) fn peek_prefix(&self, buf: &[u8]) -> Option<(usize, usize)> {
        if self.preamble_left > 0 || buf.len() < PREFIX_LEN {
            return None;
        }
        let header_len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let payload_len = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
        (header_len <= MAX_HEADER_LEN).then_some((header_len, payload_len))
    }

    /// The frame at the front of `buf` if it is a plain put, whole in the
    /// buffer and within the limits; nothing is taken off. `None` for
    /// anything else, which [`Decoder::decode_head`] then decodes (or
    /// rejects, naming why).
    pub fn peek_put(&self, buf: &[u8]) -> Option<PutFrame> {
        let (header_len, payload_len) = self.peek_prefix(buf)?;
        if payload_len > self.max_payload {
            return None;
        }
        let head_len = PREFIX_LEN + header_len;
        if buf.len() < head_len.checked_add(payload_len)? {
            return None;
        }
        let (id, window, offset) = decode_put(&buf[PREFIX_LEN..head_len])?;
        Some(PutFrame {
            id,
            window,
            offset,
            head_len,
            payload_len,
        })
    }
}

#[cfg(test)]
mod tests;
