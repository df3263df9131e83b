//! Frames on a peer stream: [`FrameReader`] takes them off a stream (a
//! payload can go straight into a window), [`write_frame`] puts one on,
//! [`finish`] ends a stream once the peer has all of it.

use crate::transport::{PeerReader, PeerWriter};
use bytes::{Buf, BytesMut};
use pld_proto::Frame;
use pld_proto::frame::{self, AckFrame, Decoder, FrameError, StoreFrame};
use pld_proto::v1::Header;
use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How much free buffer a read asks the socket to fill, at most.
const READ_CHUNK: usize = 64 * 1024;
/// ... and at first: a link that carries only small ops (or nothing:
/// every PE of a job holds a link to every other) keeps a small buffer;
/// one whose reads fill the buffer doubles it, up to [`READ_CHUNK`].
const READ_FIRST: usize = 4 * 1024;

/// Why a peer stream stopped producing frames.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("connection closed by the peer")]
    Closed,
    #[error("connection closed by the peer in the middle of a frame")]
    Truncated,
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// Frames from one peer stream.
#[derive(Debug)]
pub(crate) struct FrameReader {
    io: PeerReader,
    buf: BytesMut,
    decoder: Decoder,
    /// Payload bytes of the frame whose header was taken with
    /// [`FrameReader::try_head`] and that are still to be taken.
    owed: usize,
    /// Bytes at the front of `buf` that `consume_store` / `consume_ack`
    /// took: released by the next method that needs the stream's front
    /// ([`FrameReader::settle`]), so that a run of puts costs one
    /// `BytesMut::advance` instead of one per frame.
    taken: usize,
    /// A frame taken since the last read woke a task (see
    /// [`FrameReader::woke_a_task`]): the next [`FrameReader::fill`]
    /// yields first.
    yield_first: bool,
    /// How much free buffer the next read asks for: [`READ_FIRST`],
    /// doubled after each read that fills what it asked, up to
    /// [`READ_CHUNK`].
    want: usize,
}

impl FrameReader {
    /// Changes the decoder's payload limit (see [`Decoder::set_max_payload`]).
    pub fn set_max_payload(&mut self, max_payload: usize) {
        self.decoder.set_max_payload(max_payload);
    }

    pub fn new(io: PeerReader, decoder: Decoder) -> Self {
        FrameReader {
            io,
            buf: BytesMut::with_capacity(READ_FIRST),
            decoder,
            owed: 0,
            taken: 0,
            yield_first: false,
            want: READ_FIRST,
        }
    }

    /// Releases the bytes the fast paths took (see `taken`).
    fn settle(&mut self) {
        self.buf.advance(std::mem::take(&mut self.taken));
    }

    /// The buffered bytes not yet taken.
    fn rest(&self) -> &[u8] {
        &self.buf[self.taken..]
    }

    /// The next frame's header (and its payload length) if it is buffered;
    /// the payload stays in the stream until taken with `payload`,
    /// `payload_into_raw` or `skip_payload`.
    pub fn try_head(&mut self) -> Result<Option<(Header, usize)>, FrameError> {
        self.settle();
        let head = self.decoder.decode_head(&mut self.buf)?;
        if let Some((_, n)) = &head {
            self.owed = *n;
        }
        Ok(head)
    }

    /// The next frame, if it is a plain put or atomic add whose bytes are
    /// all buffered (see [`Decoder::peek_store`]); take it with
    /// [`FrameReader::consume_store`].
    pub fn peek_store(&self) -> Option<StoreFrame> {
        if self.owed != 0 {
            return None;
        }
        self.decoder.peek_store(self.rest())
    }

    /// The frame at the front if it is an ack without a payload, whole in
    /// the buffer (see [`Decoder::peek_ack`]); take it with
    /// [`FrameReader::consume_ack`].
    pub fn peek_ack(&self) -> Option<AckFrame> {
        if self.owed != 0 {
            return None;
        }
        self.decoder.peek_ack(self.rest())
    }

    /// Takes the ack `a` that [`FrameReader::peek_ack`] found off the stream.
    pub fn consume_ack(&mut self, a: AckFrame) {
        self.taken += a.len;
    }

    /// The payload of the store `p` that [`FrameReader::peek_store`] found.
    pub fn store_payload(&self, p: &StoreFrame) -> &[u8] {
        let start = self.taken + p.head_len;
        &self.buf[start..start + p.payload_len]
    }

    /// Takes the store `p` (header and payload) off the stream.
    pub fn consume_store(&mut self, p: StoreFrame) {
        self.taken += p.head_len + p.payload_len;
    }

    /// Whether the current frame's payload is all buffered.
    pub fn payload_buffered(&self) -> bool {
        self.rest().len() >= self.owed
    }

    /// The current frame's payload, if it is all buffered (see
    /// [`FrameReader::payload_buffered`]); empty otherwise. Take it with
    /// [`FrameReader::consume_payload`].
    pub fn buffered_payload(&self) -> &[u8] {
        self.rest().get(..self.owed).unwrap_or_default()
    }

    /// Drops the current frame's buffered payload.
    pub fn consume_payload(&mut self) {
        self.settle();
        let n = std::mem::take(&mut self.owed).min(self.buf.len());
        self.buf.advance(n);
    }

    /// The current frame's payload, read into the buffer as needed.
    pub async fn payload(&mut self) -> Result<bytes::Bytes, ReadError> {
        self.settle();
        let n = std::mem::take(&mut self.owed);
        while self.buf.len() < n {
            self.buf.reserve(n - self.buf.len());
            if self.io.read_buf(&mut self.buf).await? == 0 {
                return Err(ReadError::Truncated);
            }
        }
        Ok(self.buf.split_to(n).freeze())
    }

    /// Puts the current frame's payload into raw memory, piece after piece
    /// (a window's rows; their lengths add up to the payload's): what is
    /// buffered is copied once, the rest is read from the socket straight
    /// into place.
    pub async fn payload_into_raw(
        &mut self,
        pieces: impl Iterator<Item = crate::transport::Raw>,
    ) -> Result<(), ReadError> {
        self.settle();
        for mut piece in pieces {
            let k = piece.len.min(self.buf.len());
            // SAFETY: `piece` is valid for its length (see `Raw`) and
            // `k` is within both it and the buffer.
            unsafe { std::ptr::copy_nonoverlapping(self.buf.as_ptr(), piece.ptr, k) };
            self.buf.advance(k);
            piece = crate::transport::Raw {
                ptr: piece.ptr.wrapping_add(k),
                len: piece.len - k,
            };
            self.io
                .read_raw_exact(piece)
                .await
                .map_err(|e| match e.kind() {
                    io::ErrorKind::UnexpectedEof => ReadError::Truncated,
                    _ => ReadError::Io(e),
                })?;
            self.owed -= k + piece.len;
        }
        Ok(())
    }

    /// Reads and drops the current frame's payload.
    pub async fn skip_payload(&mut self) -> Result<(), ReadError> {
        self.settle();
        while self.owed > 0 {
            if self.buf.is_empty() {
                self.fill().await?;
            }
            let k = self.owed.min(self.buf.len());
            self.buf.advance(k);
            self.owed -= k;
        }
        Ok(())
    }

    /// The next frame already in the buffer, without reading.
    pub fn decode_buffered(&mut self) -> Result<Option<Frame>, FrameError> {
        self.settle();
        self.decoder.decode(&mut self.buf)
    }

    /// Says that the frame just taken woke a task (a reply's caller, a
    /// barrier's): the next [`FrameReader::fill`] — a read because nothing
    /// more is buffered — yields first, so that the task runs before a read
    /// that most likely finds nothing (the next frame is a round trip
    /// away). On a lone op's path that read, and the reactor check of a
    /// reader with nothing outstanding, were two `recv`s between its reply
    /// and its caller (docs/PERFORMANCE.md).
    pub fn woke_a_task(&mut self) {
        self.yield_first = true;
    }

    /// One read from the socket into the buffer.
    pub async fn fill(&mut self) -> Result<(), ReadError> {
        self.settle();
        if std::mem::take(&mut self.yield_first) {
            tokio::task::yield_now().await;
        }
        if self.buf.capacity() - self.buf.len() < self.want / 4 {
            self.buf.reserve(self.want);
        }
        let spare = self.buf.capacity() - self.buf.len();
        match self.io.read_buf(&mut self.buf).await? {
            0 if self.buf.is_empty() => Err(ReadError::Closed),
            0 => Err(ReadError::Truncated),
            n => {
                if n == spare {
                    self.want = (self.want * 2).min(READ_CHUNK);
                }
                Ok(())
            }
        }
    }

    /// The next frame, reading as needed.
    pub async fn next(&mut self) -> Result<Frame, ReadError> {
        loop {
            if let Some(f) = self.decode_buffered()? {
                return Ok(f);
            }
            self.fill().await?;
        }
    }

    /// Reads and discards until the peer closes or `limit` passes: lets a
    /// final error frame reach a peer that is still sending, since closing a
    /// TCP socket with unread input resets the connection.
    pub async fn drain(&mut self, limit: std::time::Duration) {
        let mut sink = [0u8; 4096];
        let _ = tokio::time::timeout(limit, async {
            while matches!(self.io.read(&mut sink).await, Ok(n) if n > 0) {}
        })
        .await;
    }
}

/// Payloads up to this size are copied behind their header (or into a
/// link's outbox) so that their frame leaves in one write with its
/// neighbours; larger ones are written from the caller's buffer.
pub(crate) const COALESCE_MAX: usize = 16 * 1024;

/// Writes one frame; returns the bytes written.
pub(crate) async fn write_frame(
    w: &mut PeerWriter,
    header: &Header,
    payload: &[u8],
) -> io::Result<usize> {
    let mut head = BytesMut::with_capacity(64 + payload.len().min(COALESCE_MAX));
    frame::encode_head(header, payload.len(), &mut head);
    let total = head.len() + payload.len();
    if payload.len() <= COALESCE_MAX {
        head.extend_from_slice(payload);
        w.write_all(&head).await?;
    } else {
        w.write_all(&head).await?;
        w.write_all(payload).await?;
    }
    // TLS may hold the frame's last record until flushed (a no-op on the
    // other transports).
    w.flush().await?;
    Ok(total)
}

/// Finishes a stream and waits until the peer has everything written on it
/// (QUIC acknowledges it; TCP sends the FIN after the data), for at most a
/// second.
pub(crate) async fn finish(w: &mut PeerWriter) {
    let _ = w.shutdown().await;
    if let PeerWriter::Quic(s) = w {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), s.stopped()).await;
    }
}
