//! The plain store's own frame path — a put, or an atomic add — written
//! and read without a [`Header`].
//!
//! A window of 8-byte puts is the message-rate benchmark, and the kernels
//! that scatter small stores and counter updates live on it. Building a
//! `Header` for each op, matching its body and moving it through the
//! generic decoder cost more than the op itself (docs/PERFORMANCE.md,
//! "Why the code is shaped so").
//! So a put or an atomic add without a region or a checked-mode stamp is
//! encoded straight from its fields, and a frame that is such a store,
//! whole in the buffer, is read straight into them. The bytes are exactly
//! those of [`super::encode_head`] (so of prost); a frame that is anything
//! else — another op, a store in another shape, or over a limit — is left
//! to the generic [`super::Decoder`], which decodes it or names the error,
//! so nothing means something else on this path.

use super::fast::{decode_flat, encode_flat_head, varint};
use super::{Decoder, MAX_HEADER_LEN, PREFIX_LEN};
use crate::v1::header::Body;
use crate::v1::{PeerAtomicAdd, PeerPut, Region};
use bytes::BytesMut;

/// The put's field number in `Header`.
const PUT_FIELD: u64 = 3;
/// The atomic add's field number in `Header`.
const ADD_FIELD: u64 = 5;

/// What a store frame does with its payload at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// Writes it (a put).
    Put,
    /// Adds it elementwise (an atomic add); `dtype` is the elements' type
    /// as on the wire, checked by the target.
    AtomicAdd {
        /// The `Dtype` value, unchecked.
        dtype: i32,
    },
}

impl Store {
    /// The atomic add of `dtype` elements.
    pub fn add(dtype: crate::Dtype) -> Store {
        Store::AtomicAdd {
            dtype: dtype as i32,
        }
    }

    /// The op it is.
    pub fn op(self) -> crate::OpKind {
        match self {
            Store::Put => crate::OpKind::Put,
            Store::AtomicAdd { .. } => crate::OpKind::AtomicAdd,
        }
    }

    /// Its frame's kind.
    pub fn msg_kind(self) -> crate::MsgKind {
        match self {
            Store::Put => crate::MsgKind::Put,
            Store::AtomicAdd { .. } => crate::MsgKind::AtomicAdd,
        }
    }

    /// What checked mode records for it at the target.
    pub fn access(self) -> crate::checked::AccessKind {
        match self {
            Store::Put => crate::checked::AccessKind::Put,
            Store::AtomicAdd { .. } => crate::checked::AccessKind::AtomicAdd,
        }
    }

    /// Its request body for the generic path, without a region.
    pub fn body(self, window: u32, offset: u64) -> Body {
        self.body_in(window, offset, None)
    }

    /// Its request body, landing in `region` (2-D) if there is one.
    pub fn body_in(self, window: u32, offset: u64, region: Option<Region>) -> Body {
        match self {
            Store::Put => Body::Put(PeerPut {
                window,
                offset,
                region,
            }),
            Store::AtomicAdd { dtype } => Body::AtomicAdd(PeerAtomicAdd {
                window,
                offset,
                dtype,
                region,
            }),
        }
    }
}

/// A store frame whose header and payload are all buffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreFrame {
    /// The request's id.
    pub id: u64,
    /// A put or an atomic add.
    pub store: Store,
    /// The target window.
    pub window: u32,
    /// The byte offset in it.
    pub offset: u64,
    /// Bytes before the payload: the prefix and the header.
    pub head_len: usize,
    /// The payload's length.
    pub payload_len: usize,
}

/// Appends the prefix and header of a `store` of `payload_len` bytes at
/// `offset` of `window` — the bytes `encode_head` writes for
/// `Header { id, body: Put { window, offset, region: None }, checked: None }`
/// (or `AtomicAdd { window, offset, dtype, region: None }`).
#[inline(always)]
pub fn encode_store_head(
    id: u64,
    store: Store,
    window: u32,
    offset: u64,
    payload_len: usize,
    dst: &mut BytesMut,
) {
    let w = u64::from(window);
    match store {
        Store::Put => encode_flat_head(id, PUT_FIELD, [w, offset], payload_len, dst),
        // An int32 is written sign-extended, as protobuf writes it.
        Store::AtomicAdd { dtype } => {
            let d = i64::from(dtype) as u64;
            encode_flat_head(id, ADD_FIELD, [w, offset, d], payload_len, dst)
        }
    }
}

/// `(id, store, window, offset)` if `bytes` are a store header in the
/// shape [`encode_store_head`] writes — exactly when `fast::decode` reads
/// them as a plain put or atomic add; `None` otherwise.
#[inline]
fn decode_store(bytes: &[u8]) -> Option<(u64, Store, u32, u64)> {
    if let Some(store) = decode_store_head(bytes) {
        return Some(store);
    }
    // Every small op's frame is peeked first: `decode_flat` turns away a
    // header whose body is not a store's before it parses the body.
    let (id, field, v, last) = decode_flat(bytes, [PUT_FIELD, ADD_FIELD])?;
    let store = match field {
        PUT_FIELD if last <= 2 => Store::Put,
        // prost reads an int32 as the low 32 bits of the varint.
        ADD_FIELD if last <= 3 => Store::AtomicAdd { dtype: v[2] as i32 },
        _ => return None,
    };
    Some((id, store, u32::try_from(v[0]).ok()?, v[1]))
}

/// `(id, store, window, offset)` if `bytes` are exactly what
/// [`encode_store_head`] writes for a nonzero id: `08 id 1a len [08 window]
/// [10 offset]` for a put, `08 id 2a len [08 window] [10 offset] [18
/// dtype]` for an atomic add. The shape is checked byte by byte — no loop
/// over fields, no field table — cheaper at the target than the flat
/// decoder's loop (docs/PERFORMANCE.md); anything else
/// (`None`) is left to `decode_flat`, which reads every shape prost does.
/// Whatever this accepts (explicit zero fields and long varints included),
/// `decode_flat` reads as the same store.
fn decode_store_head(b: &[u8]) -> Option<(u64, Store, u32, u64)> {
    const ID: u8 = 1 << 3;
    const PUT_BODY: u8 = (PUT_FIELD as u8) << 3 | 2;
    const ADD_BODY: u8 = (ADD_FIELD as u8) << 3 | 2;
    const WINDOW: u8 = 1 << 3;
    const OFFSET: u8 = 2 << 3;
    const DTYPE: u8 = 3 << 3;
    if *b.first()? != ID {
        return None;
    }
    let mut at = 1;
    let id = varint(b, &mut at)?;
    let (&tag, &len) = (b.get(at)?, b.get(at + 1)?);
    at += 2;
    // A one-byte body length, ending the header exactly.
    if len >= 0x80 || b.len() - at != usize::from(len) {
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
    let store = match tag {
        PUT_BODY => Store::Put,
        ADD_BODY => {
            let mut dtype = 0;
            if b.get(at) == Some(&DTYPE) {
                at += 1;
                dtype = varint(b, &mut at)?;
            }
            Store::AtomicAdd {
                dtype: dtype as i32,
            }
        }
        // (Turned away above: a body that is no store's.)
        _ => return None,
    };
    if at != b.len() {
        return None;
    }
    Some((id, store, u32::try_from(window).ok()?, offset))
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

    /// The frame at the front of `buf` if it is a plain put or atomic add,
    /// whole in the buffer and within the limits; nothing is taken off.
    /// `None` for anything else, which [`Decoder::decode_head`] then
    /// decodes (or rejects, naming why).
    pub fn peek_store(&self, buf: &[u8]) -> Option<StoreFrame> {
        let (header_len, payload_len) = self.peek_prefix(buf)?;
        if payload_len > self.max_payload {
            return None;
        }
        let head_len = PREFIX_LEN + header_len;
        if buf.len() < head_len.checked_add(payload_len)? {
            return None;
        }
        let (id, store, window, offset) = decode_store(&buf[PREFIX_LEN..head_len])?;
        Some(StoreFrame {
            id,
            store,
            window,
            offset,
            head_len,
            payload_len,
        })
    }
}

#[cfg(test)]
mod tests;
