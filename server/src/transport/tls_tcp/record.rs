//! TLS 1.3 records (RFC 8446 §5), sealed and opened in place in the
//! transport's own buffers.
//!
//! rustls makes the handshake and derives the keys (`handshake.rs`); the
//! records of the traffic that follows are ours. A record is
//! `header(5) ‖ AEAD(plaintext ‖ content type) ‖ tag(16)`, the header —
//! outer type 23, version 0x0303, the sealed length — is the AEAD's
//! associated data, and the nonce is the direction's IV XOR its record
//! sequence number. Sealing encrypts a record where its plaintext was
//! copied, inside the send buffer; opening decrypts a record where it was
//! received, inside the receive buffer. Nothing here does I/O.

use ring::aead::{self, Aad, LessSafeKey, Nonce, Tag, UnboundKey};
use rustls::ConnectionTrafficSecrets;
use std::io;
use std::ops::Range;

/// A record's header: type, version, length.
pub(crate) const HEADER: usize = 5;
/// The AEAD tag after the sealed bytes.
pub(crate) const TAG: usize = 16;
/// The most plaintext one record carries.
pub(crate) const MAX_PLAIN: usize = 1 << 14;
/// The largest record this side seals: header, a full plaintext, its
/// content type and the tag.
pub(crate) const MAX_SEALED: usize = HEADER + MAX_PLAIN + 1 + TAG;
/// The largest record a peer may send (RFC 8446 §5.2: at most 2^14 + 256
/// bytes after the header).
pub(crate) const MAX_OPENED: usize = HEADER + MAX_PLAIN + 256;
/// Outer type of every protected record.
const APPLICATION_DATA: u8 = 23;

/// What a record's plaintext is, by its inner content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Content {
    /// An alert: level and description.
    Alert,
    /// Post-handshake messages (KeyUpdate, NewSessionTicket).
    Handshake,
    /// The stream's bytes.
    Data,
}

impl Content {
    fn byte(self) -> u8 {
        match self {
            Content::Alert => 21,
            Content::Handshake => 22,
            Content::Data => APPLICATION_DATA,
        }
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("tls: {what}"))
}

/// One direction of a connection: its AEAD key, IV and the sequence number
/// of its next record.
pub(crate) struct Direction {
    key: LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl std::fmt::Debug for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direction")
            .field("cipher", self.key.algorithm())
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

impl Direction {
    /// The direction keyed by `secrets`, whose next record is number `seq`.
    pub(crate) fn new(seq: u64, secrets: &ConnectionTrafficSecrets) -> io::Result<Direction> {
        let (alg, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv)
            }
            _ => {
                return Err(invalid(
                    "the negotiated cipher suite has no record layer here",
                ));
            }
        };
        let key = UnboundKey::new(alg, key.as_ref()).map_err(|_| invalid("bad traffic key"))?;
        let iv = iv
            .as_ref()
            .try_into()
            .map_err(|_| invalid("bad traffic IV"))?;
        Ok(Direction {
            key: LessSafeKey::new(key),
            iv,
            seq,
        })
    }

    /// The records sealed or opened under this key so far, counting from
    /// the sequence number it started at.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The next record's nonce; the sequence number moves on.
    fn nonce(&mut self) -> io::Result<Nonce> {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        self.seq = self
            .seq
            .checked_add(1)
            .ok_or_else(|| invalid("record sequence number exhausted"))?;
        Ok(Nonce::assume_unique_for_key(n))
    }

    /// Seals a record in place: `rec[HEADER..HEADER + plain]` holds its
    /// plaintext and `rec` has room for the content type and the tag after
    /// it. Writes the header, returns the record's length.
    pub(crate) fn seal(
        &mut self,
        rec: &mut [u8],
        plain: usize,
        content: Content,
    ) -> io::Result<usize> {
        let body = plain + 1;
        let total = HEADER + body + TAG;
        if plain > MAX_PLAIN || rec.len() < total {
            return Err(invalid("record does not fit"));
        }
        let sealed = (body + TAG) as u16;
        let [hi, lo] = sealed.to_be_bytes();
        let header = [APPLICATION_DATA, 3, 3, hi, lo];
        rec[..HEADER].copy_from_slice(&header);
        rec[HEADER + plain] = content.byte();
        let nonce = self.nonce()?;
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(header), &mut rec[HEADER..HEADER + body])
            .map_err(|_| invalid("sealing failed"))?;
        rec[HEADER + body..total].copy_from_slice(tag.as_ref());
        Ok(total)
    }

    /// Opens the whole record `rec` (header included; see [`whole`]) in
    /// place: its content type and where its plaintext now lies in `rec`.
    pub(crate) fn open(&mut self, rec: &mut [u8]) -> io::Result<(Content, Range<usize>)> {
        if rec.len() < HEADER + 1 + TAG {
            return Err(invalid("record too short"));
        }
        let header: [u8; HEADER] = rec[..HEADER]
            .try_into()
            .map_err(|_| invalid("record too short"))?;
        let end = rec.len() - TAG;
        let tag = Tag::try_from(&rec[end..]).map_err(|_| invalid("record too short"))?;
        let nonce = self.nonce()?;
        let plain = self
            .key
            .open_in_place_separate_tag(nonce, Aad::from(header), tag, &mut rec[HEADER..end], 0..)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, rustls::Error::DecryptError))?;
        // The content type is the last non-zero byte; zeros after it are
        // padding.
        let Some(last) = plain.iter().rposition(|b| *b != 0) else {
            return Err(invalid("record without a content type"));
        };
        let content = match plain[last] {
            21 => Content::Alert,
            22 => Content::Handshake,
            APPLICATION_DATA => Content::Data,
            _ => return Err(invalid("record of an unexpected content type")),
        };
        Ok((content, HEADER..HEADER + last))
    }
}

/// The length of the record at the front of `buf` if all of it is there;
/// an error if its header cannot start a protected TLS 1.3 record.
pub(crate) fn whole(buf: &[u8]) -> io::Result<Option<usize>> {
    let [kind, major, _, hi, lo, ..] = *buf else {
        return Ok(None);
    };
    if kind != APPLICATION_DATA || major != 3 {
        return Err(invalid("received corrupt message (not a protected record)"));
    }
    let len = HEADER + usize::from(u16::from_be_bytes([hi, lo]));
    if len > MAX_OPENED {
        return Err(invalid("record overflow"));
    }
    Ok((buf.len() >= len).then_some(len))
}

/// A KeyUpdate handshake message (RFC 8446 §4.6.3).
pub(crate) fn key_update(requested: bool) -> [u8; 5] {
    [24, 0, 0, 1, u8::from(requested)]
}

/// A post-handshake message of a handshake record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PostHandshake<'a> {
    /// The peer's sending key changes after this record; whether it asks
    /// for ours to change too.
    KeyUpdate {
        /// The peer asked for an update of our key.
        requested: bool,
    },
    /// A session ticket (its body), which only a server may send.
    NewSessionTicket(&'a [u8]),
}

/// The messages of a handshake record's plaintext, in order. A message
/// split over records is refused: no TLS 1.3 stack splits these.
pub(crate) fn post_handshake(mut plain: &[u8]) -> io::Result<Vec<PostHandshake<'_>>> {
    let mut out = Vec::new();
    while let [kind, a, b, c, ref rest @ ..] = *plain {
        let len = u32::from_be_bytes([0, a, b, c]) as usize;
        let (body, next) = rest
            .split_at_checked(len)
            .ok_or_else(|| invalid("post-handshake message split over records"))?;
        out.push(match (kind, body) {
            (24, [0]) => PostHandshake::KeyUpdate { requested: false },
            (24, [1]) => PostHandshake::KeyUpdate { requested: true },
            (4, body) => PostHandshake::NewSessionTicket(body),
            _ => return Err(invalid("unexpected post-handshake message")),
        });
        plain = next;
    }
    if !plain.is_empty() {
        return Err(invalid("post-handshake message split over records"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use rustls::crypto::cipher::{AeadKey, Iv};

    fn pair() -> (Direction, Direction) {
        let secrets = || ConnectionTrafficSecrets::Aes256Gcm {
            key: AeadKey::from([9u8; 32]),
            iv: Iv::from([3u8; 12]),
        };
        (
            Direction::new(7, &secrets()).unwrap(),
            Direction::new(7, &secrets()).unwrap(),
        )
    }

    fn sealed(tx: &mut Direction, plain: &[u8], content: Content) -> Vec<u8> {
        let mut rec = vec![0u8; MAX_SEALED];
        rec[HEADER..HEADER + plain.len()].copy_from_slice(plain);
        let n = tx.seal(&mut rec, plain.len(), content).unwrap();
        rec.truncate(n);
        rec
    }

    #[test]
    fn a_sealed_record_opens_to_its_plaintext_and_type() {
        let (mut tx, mut rx) = pair();
        for (plain, content) in [
            (&b"hello"[..], Content::Data),
            (&[7u8; MAX_PLAIN][..], Content::Data),
            (&key_update(true)[..], Content::Handshake),
            (&[1, 0][..], Content::Alert),
        ] {
            let mut rec = sealed(&mut tx, plain, content);
            assert_eq!(whole(&rec).unwrap(), Some(rec.len()));
            assert_eq!(whole(&rec[..rec.len() - 1]).unwrap(), None);
            let (c, range) = rx.open(&mut rec).unwrap();
            assert_eq!((c, &rec[range]), (content, plain));
        }
        assert_eq!((tx.seq(), rx.seq()), (11, 11));
    }

    #[test]
    fn a_changed_byte_or_a_replayed_record_fails_authentication() {
        let (mut tx, mut rx) = pair();
        let good = sealed(&mut tx, b"payload", Content::Data);
        for i in 0..good.len() {
            let (_, mut rx) = pair();
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            assert!(rx.open(&mut bad).is_err(), "byte {i} changed");
        }
        let mut rec = good.clone();
        rx.open(&mut rec).unwrap();
        // The same record again: the sequence number has moved on.
        let mut again = good.clone();
        let e = rx.open(&mut again).unwrap_err();
        assert!(e.to_string().contains("cannot decrypt"), "{e}");
    }

    #[test]
    fn headers_that_cannot_start_a_record_are_refused() {
        assert!(whole(&[22, 3, 1, 0, 5]).is_err(), "a plaintext handshake");
        assert!(whole(&[23, 3, 3, 0x48, 0x01]).is_err(), "over 2^14 + 256");
        assert_eq!(whole(&[23, 3, 3]).unwrap(), None);
        assert_eq!(whole(&[23, 3, 3, 0x41, 0x00]).unwrap(), None);
    }

    #[test]
    fn post_handshake_messages_are_parsed_and_split_ones_refused() {
        let mut two = key_update(false).to_vec();
        two.extend_from_slice(&[4, 0, 0, 2, 0xaa, 0xbb]);
        assert_eq!(
            post_handshake(&two).unwrap(),
            vec![
                PostHandshake::KeyUpdate { requested: false },
                PostHandshake::NewSessionTicket(&[0xaa, 0xbb])
            ]
        );
        assert!(post_handshake(&two[..7]).is_err());
        assert!(post_handshake(&[24, 0, 0, 1, 2]).is_err());
        assert!(post_handshake(&[20, 0, 0, 0]).is_err());
    }
}
