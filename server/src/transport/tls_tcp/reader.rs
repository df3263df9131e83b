//! The receiving half of TLS over TCP: records opened in place, their
//! plaintext copied out once.

use super::handshake::tls_error;
use super::record::{self, Content, Direction, MAX_OPENED};
use super::{RECV_RECORDS, Shared, SockRead};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, ReadBuf};

/// The receiving half: records are opened where they were received, and
/// their plaintext is copied out once.
#[derive(Debug)]
pub struct TlsReader {
    pub(super) sock: SockRead,
    pub(super) rx: Direction,
    pub(super) shared: Arc<Shared>,
    pub(super) buf: Vec<u8>,
    /// Plaintext not yet taken: `buf[plain.0..plain.1]`.
    pub(super) plain: (usize, usize),
    /// Where the first record not yet opened starts; received bytes end
    /// at `filled`.
    pub(super) next: usize,
    pub(super) filled: usize,
    /// The peer sent close_notify, or closed the socket between records.
    pub(super) closed: bool,
}

impl TlsReader {
    pub(super) fn new(
        sock: SockRead,
        rx: Direction,
        shared: Arc<Shared>,
        plaintext: Vec<u8>,
        ciphertext: Vec<u8>,
    ) -> TlsReader {
        let (p, c) = (plaintext.len(), ciphertext.len());
        let mut buf = vec![0; p + c + MAX_OPENED];
        buf[..p].copy_from_slice(&plaintext);
        buf[p..p + c].copy_from_slice(&ciphertext);
        TlsReader {
            sock,
            rx,
            shared,
            buf,
            plain: (0, p),
            next: p,
            filled: p + c,
            closed: false,
        }
    }

    /// Makes plaintext available: `false` once the stream has ended.
    fn poll_plain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        loop {
            if self.plain.0 < self.plain.1 {
                return Poll::Ready(Ok(true));
            }
            if self.closed {
                return Poll::Ready(Ok(false));
            }
            if let Some(len) = record::whole(&self.buf[self.next..self.filled])? {
                let at = self.next;
                self.next += len;
                let (content, range) = self.rx.open(&mut self.buf[at..at + len])?;
                let range = at + range.start..at + range.end;
                match content {
                    Content::Data => self.plain = (range.start, range.end),
                    Content::Handshake => self.post_handshake(range)?,
                    Content::Alert => self.alert(range)?,
                }
                continue;
            }
            // A partial record (or nothing): make room behind it and read.
            if self.next == self.filled {
                (self.next, self.filled) = (0, 0);
            } else if self.buf.len() - self.filled < MAX_OPENED {
                self.buf.copy_within(self.next..self.filled, 0);
                (self.next, self.filled) = (0, self.filled - self.next);
            }
            let mut rb = ReadBuf::new(&mut self.buf[self.filled..]);
            ready!(match &mut self.sock {
                SockRead::Tokio(s) => Pin::new(s).poll_read(cx, &mut rb),
                SockRead::Spin(s) => s.poll_read(cx, &mut rb),
            })?;
            let n = rb.filled().len();
            if n > 0 && n == rb.capacity() && self.buf.len() < RECV_RECORDS * MAX_OPENED {
                // Bulk traffic: read more at a time from now on.
                self.buf.resize(RECV_RECORDS * MAX_OPENED, 0);
            }
            if n == 0 {
                if self.next < self.filled {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "tls: connection closed in the middle of a record",
                    )));
                }
                // A peer that died sends no close_notify; framing above
                // tells a cut frame from a clean end.
                self.closed = true;
            }
            self.filled += n;
        }
    }

    fn post_handshake(&mut self, range: std::ops::Range<usize>) -> io::Result<()> {
        for msg in record::post_handshake(&self.buf[range])? {
            match msg {
                record::PostHandshake::KeyUpdate { requested } => {
                    self.rx = self.shared.next_key(true)?;
                    if requested {
                        self.shared.update_asked.store(true, Ordering::Release);
                    }
                }
                record::PostHandshake::NewSessionTicket(body) => self
                    .shared
                    .kernel
                    .lock()
                    .map_err(|_| io::Error::other("tls: key schedule lock poisoned"))?
                    .new_session_ticket(body)
                    .map_err(tls_error)?,
            }
        }
        Ok(())
    }

    fn alert(&mut self, range: std::ops::Range<usize>) -> io::Result<()> {
        match self.buf[range] {
            // close_notify: the stream ends here.
            [_, 0] => {
                self.closed = true;
                Ok(())
            }
            // user_canceled is a warning that a close_notify follows.
            [1, 90] => Ok(()),
            [_, desc] => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                rustls::Error::AlertReceived(desc.into()),
            )),
            _ => Err(io::Error::new(io::ErrorKind::InvalidData, "tls: bad alert")),
        }
    }

    /// Takes up to `len` bytes of plaintext, copied to `dst`.
    fn take(&mut self, dst: *mut u8, len: usize) -> usize {
        let n = len.min(self.plain.1 - self.plain.0);
        // SAFETY: the caller's `dst` is valid for `len >= n` bytes, and the
        // source lies within the buffer, which `dst` never overlaps.
        unsafe { std::ptr::copy_nonoverlapping(self.buf.as_ptr().add(self.plain.0), dst, n) };
        self.plain.0 += n;
        n
    }

    fn take_raw(&mut self, dst: crate::transport::Raw) -> usize {
        self.take(dst.ptr, dst.len)
    }

    /// Reads up to `dst.len` bytes of plaintext into raw memory (a
    /// window's rows); 0 at the end of the stream.
    pub async fn read_raw(&mut self, dst: crate::transport::Raw) -> io::Result<usize> {
        std::future::poll_fn(move |cx| {
            if !ready!(self.poll_plain(cx))? {
                return Poll::Ready(Ok(0));
            }
            Poll::Ready(Ok(self.take_raw(dst)))
        })
        .await
    }
}

impl AsyncRead for TlsReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 || !ready!(this.poll_plain(cx))? {
            return Poll::Ready(Ok(()));
        }
        // SAFETY: `take` writes at most `remaining` bytes and they are
        // marked initialised right after.
        let n = this.take(
            unsafe { buf.unfilled_mut() }.as_mut_ptr().cast(),
            buf.remaining(),
        );
        // SAFETY: `take` initialised the first `n` unfilled bytes.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}
