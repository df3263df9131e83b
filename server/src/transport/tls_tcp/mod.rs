//! TLS over TCP: rustls makes the handshake, our record layer carries the
//! traffic.
//!
//! Through rustls's buffered stream every byte was copied twice on each side
//! (plaintext into rustls's buffer, sealed there; received 4 KiB a read,
//! opened in rustls's buffer, copied out, copied again into the window) and
//! both halves shared one lock. Here the handshake runs on rustls's
//! unbuffered API and the keys are handed over (`handshake.rs`), and each
//! half owns its direction's key and one buffer:
//!
//! - [`TlsWriter`] copies plaintext into the open record of its send
//!   buffer — from a slice, or from window memory ([`TlsWriter::write_raw_all`])
//!   — seals each record in place when it is full or on flush, and writes
//!   up to four records in one `send`;
//! - [`TlsReader`] receives as much as its buffer takes in one `recv`,
//!   opens each record in place, and copies the plaintext once: into the
//!   frame reader's buffer, or straight into a window's rows
//!   ([`TlsReader::read_raw`]).
//!
//! KeyUpdate: a writer replaces its key (announcing it under the old one)
//! before the suite's confidentiality limit, or when the peer asks; a
//! reader follows the peer's. rustls derives every next key ([`Kernel`]).

mod handshake;
mod record;
#[cfg(test)]
mod tests;

use super::spin::SpinTcp;
use crate::config::Progress;
use handshake::{Done, Kernel, tls_error};
use record::{Content, Direction, HEADER, MAX_OPENED, MAX_PLAIN, MAX_SEALED, TAG};
use rustls::pki_types::{CertificateDer, ServerName};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Records the send buffer holds once a write has filled it: what one
/// `send` writes at most. It starts with room for one, so that a link that
/// only carries small frames keeps one record's memory.
const SEND_RECORDS: usize = 4;
/// Largest records the receive buffer holds once a read has filled it:
/// what one `recv` reads at most. It starts with room for one.
const RECV_RECORDS: usize = 4;

/// A connected TCP socket in either progress mode.
#[derive(Debug)]
pub enum TcpIo {
    /// On the tokio reactor.
    Tokio(tokio::net::TcpStream),
    /// Busy-polled.
    Spin(Arc<SpinTcp>),
}

impl TcpIo {
    /// Nagle off (small ops are latency-bound), then the progress mode.
    pub fn new(stream: tokio::net::TcpStream, progress: Progress) -> io::Result<TcpIo> {
        stream.set_nodelay(true)?;
        Ok(match progress {
            Progress::Sleep => TcpIo::Tokio(stream),
            Progress::Spin {
                idle,
                oversubscribed,
            } => {
                let s = SpinTcp::new(stream.into_std()?, idle, oversubscribed)?;
                TcpIo::Spin(Arc::new(s))
            }
        })
    }
}

/// The receiving half of the socket under a [`TlsReader`].
#[derive(Debug)]
enum SockRead {
    Tokio(OwnedReadHalf),
    Spin(Arc<SpinTcp>),
}

/// The sending half of the socket under a [`TlsWriter`].
#[derive(Debug)]
enum SockWrite {
    Tokio(OwnedWriteHalf),
    Spin(Arc<SpinTcp>),
}

/// What both halves share: rustls's key schedule, and whether the peer
/// asked for our key to change.
#[derive(Debug)]
struct Shared {
    kernel: Mutex<Kernel>,
    update_asked: AtomicBool,
}

impl Shared {
    fn next_key(&self, rx: bool) -> io::Result<Direction> {
        let mut k = self
            .kernel
            .lock()
            .map_err(|_| io::Error::other("tls: key schedule lock poisoned"))?;
        let (seq, secrets) = if rx { k.update_rx() } else { k.update_tx() }.map_err(tls_error)?;
        Direction::new(seq, &secrets)
    }
}

/// The rank's server and client configs for TLS over TCP: the peer
/// plane's (`crate::tls`), with the keys extractable for our record layer
/// and no session tickets (nobody resumes).
pub(super) fn configs(
    rank: u32,
    security: &crate::tls::Security,
) -> crate::error::Result<(Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>)> {
    let mut server = crate::tls::server_config(rank, security)?;
    server.enable_secret_extraction = true;
    server.send_tls13_tickets = 0;
    let mut client = crate::tls::client_config(security)?;
    client.enable_secret_extraction = true;
    client.resumption = rustls::client::Resumption::disabled();
    Ok((Arc::new(server), Arc::new(client)))
}

/// Dials: the TLS handshake as the client naming `peer`, on the reactor;
/// then the socket in its progress mode, split into the two halves.
pub(super) async fn connect(
    mut stream: TcpStream,
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    progress: Progress,
) -> io::Result<(TlsReader, TlsWriter, Option<CertificateDer<'static>>)> {
    stream.set_nodelay(true)?;
    let done = handshake::client(&mut stream, config, name).await?;
    halves(stream, done, progress)
}

/// Accepts: the TLS handshake as the server, then the two halves.
pub(super) async fn accept(
    mut stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    progress: Progress,
) -> io::Result<(TlsReader, TlsWriter, Option<CertificateDer<'static>>)> {
    stream.set_nodelay(true)?;
    let done = handshake::server(&mut stream, config).await?;
    halves(stream, done, progress)
}

fn halves(
    stream: TcpStream,
    done: Done,
    progress: Progress,
) -> io::Result<(TlsReader, TlsWriter, Option<CertificateDer<'static>>)> {
    let Done {
        secrets,
        kernel,
        plaintext,
        ciphertext,
        peer_cert,
    } = done;
    let (tx_seq, tx) = &secrets.0.tx;
    let (rx_seq, rx) = &secrets.0.rx;
    let tx = Direction::new(*tx_seq, tx)?;
    let rx = Direction::new(*rx_seq, rx)?;
    let update_at = kernel.confidentiality_limit() / 2;
    let shared = Arc::new(Shared {
        kernel: Mutex::new(kernel),
        update_asked: AtomicBool::new(false),
    });
    let (sock_r, sock_w, spin) = match TcpIo::new(stream, progress)? {
        TcpIo::Tokio(s) => {
            let (r, w) = s.into_split();
            (SockRead::Tokio(r), SockWrite::Tokio(w), None)
        }
        TcpIo::Spin(s) => (
            SockRead::Spin(s.clone()),
            SockWrite::Spin(s.clone()),
            Some(s),
        ),
    };
    let reader = TlsReader::new(sock_r, rx, shared.clone(), plaintext, ciphertext);
    let writer = TlsWriter {
        sock: sock_w,
        tx,
        update_at,
        shared,
        buf: vec![0; MAX_SEALED],
        sent: 0,
        ready: 0,
        open: 0,
        closed: false,
        spin,
    };
    Ok((reader, writer, peer_cert))
}

/// The receiving half: records are opened where they were received, and
/// their plaintext is copied out once.
#[derive(Debug)]
pub struct TlsReader {
    sock: SockRead,
    rx: Direction,
    shared: Arc<Shared>,
    buf: Vec<u8>,
    /// Plaintext not yet taken: `buf[plain.0..plain.1]`.
    plain: (usize, usize),
    /// Where the first record not yet opened starts; received bytes end
    /// at `filled`.
    next: usize,
    filled: usize,
    /// The peer sent close_notify, or closed the socket between records.
    closed: bool,
}

impl TlsReader {
    fn new(
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

    fn take_raw(&mut self, dst: super::Raw) -> usize {
        self.take(dst.ptr, dst.len)
    }

    /// Reads up to `dst.len` bytes of plaintext into raw memory (a
    /// window's rows); 0 at the end of the stream.
    pub async fn read_raw(&mut self, dst: super::Raw) -> io::Result<usize> {
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

/// The sending half: plaintext is copied into the open record of the send
/// buffer and sealed there; sealed records leave together.
#[derive(Debug)]
pub struct TlsWriter {
    sock: SockWrite,
    tx: Direction,
    /// The sequence number at which the key is replaced.
    update_at: u64,
    shared: Arc<Shared>,
    buf: Vec<u8>,
    /// `buf[sent..ready]` is sealed and not yet written.
    sent: usize,
    ready: usize,
    /// Plaintext bytes in the open record, which starts at `ready` (its
    /// header's place, then the plaintext).
    open: usize,
    /// close_notify is queued.
    closed: bool,
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

    fn poll_push_raw(&mut self, cx: &mut Context<'_>, src: super::Raw) -> Poll<io::Result<usize>> {
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
    pub async fn write_raw_all(&mut self, mut src: super::Raw) -> io::Result<()> {
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
