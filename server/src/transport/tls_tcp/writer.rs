//! The sending half of TLS over TCP: plaintext copied into the open
//! record, sealed in place, sealed records sent together.

use super::super::spin::SpinTcp;
use super::record::{self, Content, Direction, HEADER, MAX_PLAIN, MAX_SEALED, TAG};
use super::{SEND_RECORDS, Shared, SockWrite};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};
use tokio::io::AsyncWrite;

/// The sending half: plaintext is copied into the open record of the send
/// buffer and sealed there; sealed records leave together.
#[derive(Debug)]
pub struct TlsWriter {
    pub(super) sock: SockWrite,
    pub(super) tx: Direction,
    /// The sequence number at which the key is replaced.
    pub(super) update_at: u64,
    pub(super) shared: Arc<Shared>,
    pub(super) buf: Vec<u8>,
    /// `buf[sent..ready]` is sealed and not yet written.
    pub(super) sent: usize,
    pub(super) ready: usize,
    /// Plaintext bytes in the open record, which starts at `ready` (its
    /// header's place, then the plaintext).
    pub(super) open: usize,
    /// close_notify is queued.
    pub(super) closed: bool,
    /// The spinning socket under this writer, if it spins, which the link
    /// tells when replies are due.
    pub(crate) spin: Option<Arc<SpinTcp>>,
}

impl TlsWriter {
    /// How much plaintext the open record can still take (0: the buffer
    /// must be written first). A record is opened only after a KeyUpdate
    /// that is due has been queued.
    fn room(&mut self) -> io::Result<usize> {
        if self.open == 0 && self.buf.len() - self.ready >= MAX_SEALED && self.update_due() {
            self.seal_record(&record::key_update(false), Content::Handshake)?;
            self.tx = self.shared.next_key(false)?;
        }
        let end = self.ready + HEADER + self.open + 1 + TAG;
        Ok((MAX_PLAIN - self.open).min(self.buf.len().saturating_sub(end)))
    }

    fn update_due(&self) -> bool {
        self.tx.seq() >= self.update_at || self.shared.update_asked.swap(false, Ordering::AcqRel)
    }

    /// Seals a whole record of `plain` (nothing may be open).
    fn seal_record(&mut self, plain: &[u8], content: Content) -> io::Result<()> {
        let at = self.ready + HEADER;
        self.buf[at..at + plain.len()].copy_from_slice(plain);
        self.ready += self
            .tx
            .seal(&mut self.buf[self.ready..], plain.len(), content)?;
        Ok(())
    }

    /// Seals the open record, if there is one.
    fn seal_open(&mut self) -> io::Result<()> {
        if self.open > 0 {
            let plain = std::mem::take(&mut self.open);
            self.ready += self
                .tx
                .seal(&mut self.buf[self.ready..], plain, Content::Data)?;
        }
        Ok(())
    }

    /// Copies up to `len` bytes from `src` into open records, sealing each
    /// that fills; writes the buffer first when it has no room.
    fn poll_push(
        &mut self,
        cx: &mut Context<'_>,
        src: *const u8,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        if len == 0 {
            return Poll::Ready(Ok(0));
        }
        loop {
            let room = self.room()?;
            if room > 0 {
                let n = room.min(len);
                let at = self.ready + HEADER + self.open;
                // SAFETY: the caller's `src` is valid for `len >= n` bytes;
                // `room` keeps `at + n` within the buffer, which `src`
                // never overlaps.
                unsafe { std::ptr::copy_nonoverlapping(src, self.buf.as_mut_ptr().add(at), n) };
                self.open += n;
                if self.open == MAX_PLAIN {
                    self.seal_open()?;
                }
                return Poll::Ready(Ok(n));
            }
            self.seal_open()?;
            ready!(self.poll_send(cx))?;
            if self.buf.len() < SEND_RECORDS * MAX_SEALED {
                // Bulk traffic: write more at a time from now on.
                self.buf.resize(SEND_RECORDS * MAX_SEALED, 0);
            }
        }
    }

    fn poll_push_raw(
        &mut self,
        cx: &mut Context<'_>,
        src: crate::transport::Raw,
    ) -> Poll<io::Result<usize>> {
        self.poll_push(cx, src.ptr, src.len)
    }

    /// Writes the sealed records; the buffer starts over once they are all
    /// on the socket.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.ready {
            let chunk = &self.buf[self.sent..self.ready];
            let n = ready!(match &mut self.sock {
                SockWrite::Tokio(s) => Pin::new(s).poll_write(cx, chunk),
                SockWrite::Spin(s) => s.poll_write(cx, chunk),
            })?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        if self.open > 0 {
            // Unreachable as written (records are sealed before a send),
            // but the open record must survive the buffer starting over.
            let from = self.ready..self.ready + HEADER + self.open;
            self.buf.copy_within(from, 0);
        }
        (self.sent, self.ready) = (0, 0);
        Poll::Ready(Ok(()))
    }

    /// Replaces the key once it has sealed `n` records (tests).
    #[cfg(test)]
    pub(crate) fn set_update_at(&mut self, n: u64) {
        self.update_at = n;
    }

    /// Writes all of raw memory `src` (a window's rows) and flushes.
    pub async fn write_raw_all(&mut self, mut src: crate::transport::Raw) -> io::Result<()> {
        while src.len > 0 {
            let this = &mut *self;
            let n = std::future::poll_fn(move |cx| this.poll_push_raw(cx, src)).await?;
            src = src.offset(n);
        }
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_flush(cx)).await
    }
}

impl AsyncWrite for TlsWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_push(cx, buf.as_ptr(), buf.len())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.seal_open()?;
        this.poll_send(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.seal_open()?;
        if !this.closed {
            if this.buf.len() - this.ready < MAX_SEALED {
                ready!(this.poll_send(cx))?;
            }
            this.seal_record(&[1, 0], Content::Alert)?;
            this.closed = true;
        }
        ready!(this.poll_send(cx))?;
        match &mut this.sock {
            SockWrite::Tokio(s) => Pin::new(s).poll_shutdown(cx),
            SockWrite::Spin(s) => Poll::Ready(s.shutdown()),
        }
    }
}
