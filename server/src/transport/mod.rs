//! The two peer-plane transports behind one interface.
//!
//! A [`Connection`] is one ordered, reliable byte stream each way: a TCP
//! connection, or one long-lived bidirectional QUIC stream (measured faster
//! for small ops than a stream per op; see `docs/PERFORMANCE.md`). Everything
//! above this module — framing, handshake, request ids — is shared.

mod quic;
pub(crate) mod spin;
mod tcp;
mod tls_tcp;

pub use quic::TransportSettings;
/// A QUIC connection (quinn's), as held by [`Connection`].
pub use quinn::Connection as QuicConnection;
pub use spin::SpinTcp;
pub use tcp::TcpOpts;
pub use tls_tcp::{TcpIo, TlsReader, TlsWriter};

use crate::config::TransportKind;
use crate::error::{Error, Result};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A loopback port that is free for both TCP and UDP right now, for running
/// a cluster on one machine (demos, tests, benchmarks). Ports come from
/// 20000..32000, below Linux's ephemeral range, so no outgoing connection
/// takes the port before the rank binds it; each process walks its own
/// permutation of the range, so concurrent test processes rarely meet.
pub fn free_loopback_port() -> io::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    const BASE: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let seed = std::process::id().wrapping_mul(2_654_435_761);
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // 7919 is prime and does not divide SPAN: the walk visits every port.
        let port = (BASE + seed.wrapping_add(n.wrapping_mul(7919)) % SPAN) as u16;
        let tcp = std::net::TcpListener::bind(("127.0.0.1", port));
        let udp = std::net::UdpSocket::bind(("127.0.0.1", port));
        if tcp.is_ok() && udp.is_ok() {
            return Ok(port);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "no free loopback port in 20000..32000",
    ))
}

/// Memory that a payload is read into or written from, given by address:
/// rows of a window, which peers read and write while this rank serves
/// them. No Rust reference to it is ever made; the kernel (or a raw copy)
/// moves the bytes.
#[derive(Debug, Clone, Copy)]
pub struct Raw {
    /// The first byte.
    pub ptr: *mut u8,
    /// How many bytes.
    pub len: usize,
}

// SAFETY: a `Raw` points into window memory, which is shared by design and
// outlives every task that serves the window (the tasks hold the rank).
unsafe impl Send for Raw {}

impl Raw {
    fn offset(self, n: usize) -> Raw {
        Raw {
            ptr: self.ptr.wrapping_add(n),
            len: self.len - n,
        }
    }
}

fn check(n: isize) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn recv_raw(s: &std::net::TcpStream, dst: Raw, flags: libc::c_int) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: `dst` is valid for `len` bytes (see `Raw`); the kernel writes
    // at most that many.
    check(unsafe { libc::recv(s.as_raw_fd(), dst.ptr.cast(), dst.len, flags) })
}

fn send_raw(s: &std::net::TcpStream, src: Raw, flags: libc::c_int) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: `src` is valid for `len` bytes (see `Raw`).
    check(unsafe {
        libc::send(
            s.as_raw_fd(),
            src.ptr.cast(),
            src.len,
            flags | libc::MSG_NOSIGNAL,
        )
    })
}

/// A borrowed std view of a tokio stream's descriptor, never dropped.
fn tokio_fd(s: &tokio::net::TcpStream) -> std::mem::ManuallyDrop<std::net::TcpStream> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: the descriptor stays open while `s` lives, and ManuallyDrop
    // keeps this view from closing it.
    std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(s.as_raw_fd()) })
}

impl PeerReader {
    /// Reads into raw memory; `Ok(0)` at the end of the stream.
    pub async fn read_raw(&mut self, dst: Raw) -> io::Result<usize> {
        match self {
            PeerReader::Tcp(r) => loop {
                let s = r.as_ref();
                s.readable().await?;
                match s.try_io(tokio::io::Interest::READABLE, || {
                    recv_raw(&tokio_fd(s), dst, 0)
                }) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    r => return r,
                }
            },
            PeerReader::Spin(s) => std::future::poll_fn(move |cx| s.poll_read_raw(cx, dst)).await,
            PeerReader::Tls(t) => t.read_raw(dst).await,
            PeerReader::Quic(r) => match r.read_chunk(dst.len, true).await {
                Ok(Some(chunk)) => {
                    // SAFETY: the chunk holds at most `dst.len` bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            chunk.bytes.as_ptr(),
                            dst.ptr,
                            chunk.bytes.len(),
                        )
                    };
                    Ok(chunk.bytes.len())
                }
                Ok(None) => Ok(0),
                Err(e) => Err(io::Error::other(e)),
            },
        }
    }

    /// Fills all of `dst`.
    pub async fn read_raw_exact(&mut self, mut dst: Raw) -> io::Result<()> {
        while dst.len > 0 {
            let n = self.read_raw(dst).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            dst = dst.offset(n);
        }
        Ok(())
    }
}

impl PeerWriter {
    /// Whether this transport writes from raw memory (TCP sends it, TLS
    /// copies it into its records); QUIC takes its data into its own
    /// buffers, so callers copy for it instead.
    pub fn writes_raw(&self) -> bool {
        !matches!(self, PeerWriter::Quic(_))
    }

    /// Writes all of raw memory `src`. Only for transports that
    /// [`PeerWriter::writes_raw`].
    pub async fn write_raw_all(&mut self, mut src: Raw) -> io::Result<()> {
        while src.len > 0 {
            let n = match self {
                PeerWriter::Tcp(w) => loop {
                    let s = w.as_ref();
                    s.writable().await?;
                    match s.try_io(tokio::io::Interest::WRITABLE, || {
                        send_raw(&tokio_fd(s), src, 0)
                    }) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        r => break r?,
                    }
                },
                PeerWriter::Spin(s) => {
                    std::future::poll_fn(move |cx| s.poll_write_raw(cx, src)).await?
                }
                // Copied into records and flushed.
                PeerWriter::Tls(t) => return t.write_raw_all(src).await,
                PeerWriter::Quic(_) => {
                    return Err(io::Error::other("QUIC does not write from raw memory"));
                }
            };
            src = src.offset(n);
        }
        Ok(())
    }
}

/// The receiving half of a peer connection.
#[derive(Debug)]
pub enum PeerReader {
    /// Plain TCP on the tokio reactor.
    Tcp(tokio::net::tcp::OwnedReadHalf),
    /// Plain TCP, busy-polled.
    Spin(std::sync::Arc<SpinTcp>),
    /// A QUIC stream.
    Quic(quinn::RecvStream),
    /// TCP with TLS.
    Tls(Box<tls_tcp::TlsReader>),
}

/// The sending half of a peer connection.
#[derive(Debug)]
pub enum PeerWriter {
    /// Plain TCP on the tokio reactor.
    Tcp(tokio::net::tcp::OwnedWriteHalf),
    /// Plain TCP, busy-polled.
    Spin(std::sync::Arc<SpinTcp>),
    /// A QUIC stream.
    Quic(quinn::SendStream),
    /// TCP with TLS.
    Tls(Box<tls_tcp::TlsWriter>),
}

impl PeerWriter {
    /// The spinning TCP socket under this writer, if there is one.
    pub fn spin(&self) -> Option<&std::sync::Arc<SpinTcp>> {
        match self {
            PeerWriter::Spin(s) => Some(s),
            PeerWriter::Tls(t) => t.spin.as_ref(),
            _ => None,
        }
    }
}

impl AsyncRead for PeerReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerReader::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            PeerReader::Spin(s) => s.poll_read(cx, buf),
            PeerReader::Quic(r) => Pin::new(r).poll_read(cx, buf),
            PeerReader::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PeerWriter::Tcp(w) => Pin::new(w).poll_write(cx, buf),
            PeerWriter::Spin(s) => s.poll_write(cx, buf),
            PeerWriter::Quic(w) => Pin::new(w).poll_write(cx, buf).map_err(io::Error::from),
            PeerWriter::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerWriter::Tcp(w) => Pin::new(w).poll_flush(cx),
            PeerWriter::Spin(_) => Poll::Ready(Ok(())),
            PeerWriter::Quic(w) => Pin::new(w).poll_flush(cx),
            PeerWriter::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerWriter::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            PeerWriter::Spin(s) => Poll::Ready(s.shutdown()),
            PeerWriter::Quic(w) => Pin::new(w).poll_shutdown(cx),
            PeerWriter::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}

/// One established peer connection.
#[derive(Debug)]
pub struct Connection {
    /// Where frames arrive.
    pub reader: PeerReader,
    /// Where frames go.
    pub writer: PeerWriter,
    /// The peer's address.
    pub remote: SocketAddr,
    /// Keeps the QUIC connection open and lets its owner close it.
    pub quic: Option<quinn::Connection>,
    /// The peer's certificate, when the connection is mutual TLS.
    pub peer_cert: Option<rustls::pki_types::CertificateDer<'static>>,
}

impl Connection {
    /// Closes the connection at once (QUIC sends CONNECTION_CLOSE; TCP is
    /// closed when the halves drop).
    pub fn close(&self, reason: &str) {
        if let Some(c) = &self.quic {
            c.close(0u32.into(), reason.as_bytes());
        }
    }
}

/// A bound peer-plane endpoint: accepts peers and dials them.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// A TCP listener and how its connections are made.
    Tcp(std::sync::Arc<tokio::net::TcpListener>, tcp::TcpOpts),
    /// A QUIC endpoint (accepts and dials).
    Quic(quinn::Endpoint),
}

/// A connection that has arrived but is not yet established (the QUIC
/// handshake still runs); completing it off the accept loop keeps a slow
/// peer from holding up the others.
#[derive(Debug)]
pub enum Incoming {
    /// An accepted TCP socket, its peer address and the endpoint's options.
    Tcp(tokio::net::TcpStream, SocketAddr, tcp::TcpOpts),
    /// A QUIC connection attempt.
    Quic(Box<quinn::Incoming>),
}

impl Endpoint {
    /// Binds `addr` for `rank`.
    pub async fn bind(
        kind: TransportKind,
        addr: SocketAddr,
        rank: u32,
        settings: &TransportSettings,
    ) -> Result<Endpoint> {
        match kind {
            TransportKind::Tcp => {
                let opts = tcp::TcpOpts::new(rank, settings.progress, &settings.security)?;
                tcp::bind(addr).await.map(|l| Endpoint::Tcp(l.into(), opts))
            }
            TransportKind::Quic => quic::bind(addr, rank, settings).map(Endpoint::Quic),
        }
        .map_err(|e| match e {
            Error::Io { error, .. } => Error::io(format!("cannot listen on {addr}"), error),
            other => other,
        })
    }

    /// A QUIC endpoint that only dials (for tools and tests).
    pub fn quic_client(settings: &TransportSettings) -> Result<Endpoint> {
        quic::client_only(settings).map(Endpoint::Quic)
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Endpoint::Tcp(l, _) => l.local_addr(),
            Endpoint::Quic(e) => e.local_addr(),
        }
    }

    /// The next arriving connection; `None` once the endpoint is closed.
    pub async fn accept(&self) -> Option<Incoming> {
        match self {
            Endpoint::Tcp(l, opts) => loop {
                match l.accept().await {
                    Ok((s, a)) => return Some(Incoming::Tcp(s, a, opts.clone())),
                    // Transient (EMFILE, ECONNABORTED, ...): log and keep accepting.
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                }
            },
            Endpoint::Quic(e) => e.accept().await.map(|i| Incoming::Quic(Box::new(i))),
        }
    }

    /// Dials the rank `peer` at `addr` and opens the request stream.
    pub async fn dial(&self, addr: SocketAddr, peer: u32) -> io::Result<Connection> {
        match self {
            Endpoint::Tcp(_, opts) => tcp::dial(addr, peer, opts).await,
            Endpoint::Quic(e) => quic::dial(e, addr, peer).await,
        }
    }

    /// Closes the endpoint: QUIC tells every peer at once.
    pub fn close(&self) {
        if let Endpoint::Quic(e) = self {
            e.close(0u32.into(), b"rank shutting down");
        }
    }
}

impl Incoming {
    /// Where the connection comes from.
    pub fn remote(&self) -> SocketAddr {
        match self {
            Incoming::Tcp(_, a, _) => *a,
            Incoming::Quic(i) => i.remote_address(),
        }
    }

    /// Completes the connection and accepts the peer's request stream.
    pub async fn establish(self) -> io::Result<Connection> {
        match self {
            Incoming::Tcp(s, a, opts) => tcp::established(s, a, &opts).await,
            Incoming::Quic(i) => quic::establish(*i).await,
        }
    }
}
