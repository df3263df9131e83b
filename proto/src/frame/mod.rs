//! The peer-plane frame: `u32 LE header_len | u32 LE payload_len | header | payload`.
//!
//! The header is a protobuf [`Header`]; the payload is raw bytes that never
//! pass through protobuf, so a put's data goes from the socket buffer to the
//! window without being decoded. [`Decoder`] is a pure state machine over a
//! byte buffer: feed it what the socket gave, take whole frames out.

mod ack;
mod fast;
mod store;
#[cfg(test)]
mod test_rng;

pub use crate::op::MsgKind;
pub use ack::{AckFrame, encode_ack_head};
pub use store::{Store, StoreFrame, encode_store_head};

use crate::v1::{ErrorCode, ErrorReply, Header, header::Body};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;

/// What the dialing side sends before its first frame.
pub const PREAMBLE: [u8; 4] = *b"PLD1";
/// Bytes before the header: the two little-endian u32 lengths.
pub const PREFIX_LEN: usize = 8;
/// The largest header any pld rank sends or accepts.
pub const MAX_HEADER_LEN: usize = 64 * 1024;
/// The largest payload in one frame unless configured otherwise. Larger
/// transfers are split into several frames.
pub const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;
/// The payload limit before a peer's Hello is accepted, whatever the
/// configured limit: a handshake's frames carry at most a Hello.
pub const HANDSHAKE_MAX_PAYLOAD: usize = 64 << 10;

/// One decoded frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// What the frame is and how long its payload.
    pub header: Header,
    /// The frame's body.
    pub payload: Bytes,
}

impl Frame {
    /// The kind of message the header carries.
    pub fn kind(&self) -> MsgKind {
        MsgKind::of(&self.header)
    }
}

/// Why bytes from a peer are not a frame. Every variant is fatal for the
/// connection it came from: after it, the stream cannot be resynchronised.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The connection did not start with [`PREAMBLE`].
    #[error("not a pld peer: the connection must start with \"PLD1\", it started with {got}")]
    BadPreamble { got: String },
    /// A header length over [`MAX_HEADER_LEN`].
    #[error("frame header of {len} bytes exceeds the limit of {max} bytes")]
    HeaderTooLarge { len: usize, max: usize },
    /// A payload length over the receiver's limit.
    #[error("frame payload of {len} bytes exceeds the limit of {max} bytes")]
    PayloadTooLarge { len: usize, max: usize },
    /// A header that is not a valid protobuf `Header`.
    #[error("frame header does not decode: {reason}")]
    Malformed { reason: String },
}

impl FrameError {
    /// The code an error reply carries for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            FrameError::BadPreamble { .. } => ErrorCode::BadPreamble,
            FrameError::HeaderTooLarge { .. } | FrameError::PayloadTooLarge { .. } => {
                ErrorCode::FrameTooLarge
            }
            FrameError::Malformed { .. } => ErrorCode::MalformedFrame,
        }
    }

    /// The error reply to send before closing the connection.
    pub fn to_reply(&self) -> Header {
        error_header(0, self.code(), self.to_string())
    }
}

/// A header acknowledging op `id` — cumulatively, every outstanding op
/// from `first` to `id`, where `first` is not 0.
pub fn ack_header(id: u64, first: u64) -> Header {
    Header {
        id,
        body: Some(Body::Ack(crate::v1::Ack { first })),
        checked: None,
    }
}

/// A header carrying an error reply.
pub fn error_header(id: u64, code: ErrorCode, message: String) -> Header {
    Header {
        id,
        body: Some(Body::Error(ErrorReply {
            code: code as i32,
            message,
        })),
        checked: None,
    }
}

/// Appends the length prefix and the encoded header for a frame whose payload
/// of `payload_len` bytes the caller writes next.
pub fn encode_head(header: &Header, payload_len: usize, dst: &mut BytesMut) {
    let mut fast_bytes = [0u8; fast::MAX_LEN];
    if let Some(n) = fast::encode(header, &mut fast_bytes) {
        dst.reserve(PREFIX_LEN + n);
        dst.put_u32_le(n as u32);
        dst.put_u32_le(u32::try_from(payload_len).unwrap_or(u32::MAX));
        dst.extend_from_slice(&fast_bytes[..n]);
        return;
    }
    let header_len = header.encoded_len();
    debug_assert!(header_len <= MAX_HEADER_LEN);
    dst.reserve(PREFIX_LEN + header_len);
    dst.put_u32_le(header_len as u32);
    dst.put_u32_le(u32::try_from(payload_len).unwrap_or(u32::MAX));
    // Encoding into a BytesMut that has the capacity reserved cannot fail.
    header
        .encode(dst)
        .unwrap_or_else(|_| unreachable!("capacity reserved"));
}

/// Encodes a whole frame into one buffer (copies the payload; meant for
/// small frames and for tests).
pub fn encode(header: &Header, payload: &[u8]) -> BytesMut {
    let mut buf = BytesMut::with_capacity(PREFIX_LEN + header.encoded_len() + payload.len());
    encode_head(header, payload.len(), &mut buf);
    buf.extend_from_slice(payload);
    buf
}

/// Turns a byte stream into frames.
#[derive(Debug, Clone)]
pub struct Decoder {
    max_payload: usize,
    /// Preamble bytes still to check, for the accepting side of a connection.
    preamble_left: usize,
}

impl Decoder {
    /// A decoder for the dialing side: frames from the first byte.
    pub fn new(max_payload: usize) -> Self {
        Decoder {
            max_payload,
            preamble_left: 0,
        }
    }

    /// A decoder for the accepting side: the stream starts with [`PREAMBLE`].
    pub fn expecting_preamble(max_payload: usize) -> Self {
        Decoder {
            max_payload,
            preamble_left: PREAMBLE.len(),
        }
    }

    /// The payload limit this decoder enforces.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// Changes the payload limit: small until the peer's Hello has been
    /// accepted, the configured one after.
    pub fn set_max_payload(&mut self, max_payload: usize) {
        self.max_payload = max_payload;
    }

    /// Takes one whole frame off the front of `buf`.
    ///
    /// `Ok(None)` means more bytes are needed; the decoder has then reserved
    /// room in `buf` for the rest of the frame, so that the next read can
    /// fill it. Errors are final for the stream.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some((header_len, payload_len)) = self.prefix(buf)? else {
            return Ok(None);
        };
        let total = PREFIX_LEN + header_len + payload_len;
        if buf.len() < total {
            buf.reserve(total - buf.len());
            return Ok(None);
        }
        let header = decode_header(&buf[PREFIX_LEN..PREFIX_LEN + header_len])?;
        let mut frame = buf.split_to(total);
        frame.advance(PREFIX_LEN + header_len);
        Ok(Some(Frame {
            header,
            payload: frame.freeze(),
        }))
    }

    /// Takes one frame's length prefix and header off the front of `buf`,
    /// leaving its payload where it is: `(header, payload_len)`. For readers
    /// that put large payloads straight where they belong. `Ok(None)` means
    /// more bytes are needed (room is reserved for the header).
    pub fn decode_head(
        &mut self,
        buf: &mut BytesMut,
    ) -> Result<Option<(Header, usize)>, FrameError> {
        let Some((header_len, payload_len)) = self.prefix(buf)? else {
            return Ok(None);
        };
        if buf.len() < PREFIX_LEN + header_len {
            buf.reserve(PREFIX_LEN + header_len - buf.len());
            return Ok(None);
        }
        let header = decode_header(&buf[PREFIX_LEN..PREFIX_LEN + header_len])?;
        buf.advance(PREFIX_LEN + header_len);
        Ok(Some((header, payload_len)))
    }

    /// Checks the preamble (once) and the length prefix: `(header_len,
    /// payload_len)` once the prefix is buffered, both within the limits.
    fn prefix(&mut self, buf: &mut BytesMut) -> Result<Option<(usize, usize)>, FrameError> {
        if self.preamble_left > 0 {
            let seen = PREAMBLE.len() - self.preamble_left;
            let n = self.preamble_left.min(buf.len());
            if buf[..n] != PREAMBLE[seen..seen + n] {
                return Err(FrameError::BadPreamble {
                    got: describe_bytes(&buf[..buf.len().min(16)]),
                });
            }
            buf.advance(n);
            self.preamble_left -= n;
            if self.preamble_left > 0 {
                return Ok(None);
            }
        }
        if buf.len() < PREFIX_LEN {
            buf.reserve(PREFIX_LEN);
            return Ok(None);
        }
        let header_len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let payload_len = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
        if header_len > MAX_HEADER_LEN {
            return Err(FrameError::HeaderTooLarge {
                len: header_len,
                max: MAX_HEADER_LEN,
            });
        }
        if payload_len > self.max_payload {
            return Err(FrameError::PayloadTooLarge {
                len: payload_len,
                max: self.max_payload,
            });
        }
        Ok(Some((header_len, payload_len)))
    }
}

fn decode_header(bytes: &[u8]) -> Result<Header, FrameError> {
    if let Some(h) = fast::decode(bytes) {
        return Ok(h);
    }
    Header::decode(bytes).map_err(|e| FrameError::Malformed {
        reason: e.to_string(),
    })
}

/// Shows bytes as hex and, where printable, as text: `47 45 54 20 ("GET ")`.
fn describe_bytes(bytes: &[u8]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let text: String = bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        })
        .collect();
    format!("{} ({text:?})", hex.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{Ack, PeerGet, PeerPut};

    fn put(id: u64) -> Header {
        Header {
            id,
            body: Some(Body::Put(PeerPut {
                window: 1,
                offset: 64,
                region: None,
            })),
            checked: None,
        }
    }

    #[test]
    fn frames_split_across_reads_decode_whole_and_in_order() {
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&PREAMBLE);
        wire.extend_from_slice(&encode(&put(1), b"hello"));
        let get = Header {
            id: 2,
            body: Some(Body::Get(PeerGet {
                window: 0,
                offset: 8,
                len: 16,
                region: None,
            })),
            checked: None,
        };
        wire.extend_from_slice(&encode(&get, b""));
        // Feed one byte at a time: every prefix must either wait or yield a frame.
        let mut dec = Decoder::expecting_preamble(1024);
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for b in wire.iter() {
            buf.put_u8(*b);
            while let Some(f) = dec.decode(&mut buf).unwrap() {
                frames.push(f);
            }
        }
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].header, put(1));
        assert_eq!(&frames[0].payload[..], b"hello");
        assert_eq!(frames[1].header, get);
        assert!(frames[1].payload.is_empty());
        assert!(buf.is_empty());
    }

    #[test]
    fn decode_head_leaves_the_payload_in_the_buffer() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&PREAMBLE);
        buf.extend_from_slice(&encode(&put(1), b"payload"));
        buf.extend_from_slice(&encode(&put(2), b""));
        let mut dec = Decoder::expecting_preamble(1024);
        let (h, n) = dec.decode_head(&mut buf).unwrap().unwrap();
        assert_eq!((h, n), (put(1), 7));
        assert_eq!(&buf[..7], b"payload");
        buf.advance(7);
        let f = dec.decode(&mut buf).unwrap().unwrap();
        assert_eq!(f.header, put(2));
    }

    #[test]
    fn a_wrong_first_byte_is_a_bad_preamble_at_once() {
        let mut dec = Decoder::expecting_preamble(1024);
        let mut buf = BytesMut::from(&b"G"[..]);
        let err = dec.decode(&mut buf).unwrap_err();
        assert_eq!(err.code(), ErrorCode::BadPreamble);
        assert!(err.to_string().contains("47 (\"G\")"), "{err}");
    }

    #[test]
    fn oversized_lengths_are_rejected_before_any_payload_arrives() {
        let mut dec = Decoder::new(100);
        let mut buf = BytesMut::new();
        buf.put_u32_le(4);
        buf.put_u32_le(101);
        assert_eq!(
            dec.decode(&mut buf).unwrap_err(),
            FrameError::PayloadTooLarge { len: 101, max: 100 }
        );
        let mut buf = BytesMut::new();
        buf.put_u32_le(u32::MAX);
        buf.put_u32_le(0);
        assert!(matches!(
            Decoder::new(100).decode(&mut buf),
            Err(FrameError::HeaderTooLarge { .. })
        ));
    }

    #[test]
    fn garbage_header_bytes_are_malformed() {
        let mut buf = BytesMut::new();
        buf.put_u32_le(3);
        buf.put_u32_le(0);
        buf.extend_from_slice(&[0xff, 0xff, 0xff]);
        let err = Decoder::new(100).decode(&mut buf).unwrap_err();
        assert_eq!(err.code(), ErrorCode::MalformedFrame);
    }

    #[test]
    fn msg_kind_names_every_body() {
        let ack = Header {
            id: 3,
            body: Some(Body::Ack(Ack::default())),
            checked: None,
        };
        assert_eq!(MsgKind::of(&ack), MsgKind::Ack);
        assert_eq!(MsgKind::of(&Header::default()), MsgKind::Empty);
        for (i, k) in MsgKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
        }
    }
}
