//! The acknowledgement's own frame path: written and read without a
//! [`Header`], as a plain put is (see `put`).
//!
//! Every put, atomic add and notify is answered by an ack, alone or in a
//! cumulative run. Building a `Header` for each, moving it through the
//! generic decoder and matching its body was a large share of a lone
//! put's reader's work (docs/PERFORMANCE.md). So an ack
//! without a checked-mode stamp or a payload is encoded straight from its
//! two fields, and a frame that is such an ack, whole in the buffer, is
//! read straight into them. The bytes are exactly those of
//! [`super::encode_head`] (so of prost); anything else is left to the
//! generic [`super::Decoder`], which decodes it or names the error.

use super::fast::{decode_flat, encode_flat_head};
use super::{Decoder, PREFIX_LEN};
use bytes::BytesMut;

/// The ack's field number in `Header`.
const ACK_FIELD: u64 = 16;

/// An ack frame, whole in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckFrame {
    /// The last request it acknowledges.
    pub id: u64,
    /// The first, for a cumulative ack; 0 for an ack of `id` alone.
    pub first: u64,
    /// The frame's length: the prefix and the header (it has no payload).
    pub len: usize,
}

/// Appends the frame of `Ack { first }` under `id` — the bytes
/// `encode_head` writes for `Header { id, body: Ack { first }, checked:
/// None }` with no payload.
pub fn encode_ack_head(id: u64, first: u64, dst: &mut BytesMut) {
    encode_flat_head(id, ACK_FIELD, [first], 0, dst);
}

/// `(id, first)` if `bytes` are an ack header in the shape
/// [`encode_ack_head`] writes — exactly when `fast::decode` reads them as
/// an ack; `None` otherwise.
fn decode_ack(bytes: &[u8]) -> Option<(u64, u64)> {
    match decode_flat(bytes, [ACK_FIELD])? {
        (id, ACK_FIELD, v, last) if last <= 1 => Some((id, v[0])),
        _ => None,
    }
}

impl Decoder {
    /// The frame at the front of `buf` if it is an ack without a payload,
    /// whole in the buffer and within the limits; nothing is taken off.
    /// `None` for anything else, which [`Decoder::decode_head`] then
    /// decodes (or rejects, naming why).
    pub fn peek_ack(&self, buf: &[u8]) -> Option<AckFrame> {
        let (header_len, payload_len) = self.peek_prefix(buf)?;
        if payload_len != 0 {
            return None;
        }
        let len = PREFIX_LEN + header_len;
        let (id, first) = decode_ack(buf.get(PREFIX_LEN..len)?)?;
        Some(AckFrame { id, first, len })
    }
}

#[cfg(test)]
mod tests;
