//! TLS over TCP: the socket (sleeping or spinning) under rustls, split
//! into the halves a peer connection reads and writes.

use super::spin::SpinTcp;
use crate::config::Progress;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};

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
            Progress::Spin { idle } => {
                TcpIo::Spin(Arc::new(SpinTcp::new(stream.into_std()?, idle)?))
            }
        })
    }
}

impl AsyncRead for TcpIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            TcpIo::Tokio(s) => Pin::new(s).poll_read(cx, buf),
            TcpIo::Spin(s) => s.poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for TcpIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            TcpIo::Tokio(s) => Pin::new(s).poll_write(cx, buf),
            TcpIo::Spin(s) => s.poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            TcpIo::Tokio(s) => Pin::new(s).poll_flush(cx),
            TcpIo::Spin(_) => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            TcpIo::Tokio(s) => Pin::new(s).poll_shutdown(cx),
            TcpIo::Spin(s) => Poll::Ready(s.shutdown()),
        }
    }
}

type Tls = tokio_rustls::TlsStream<TcpIo>;

/// A peer that closes the socket without TLS's close_notify (it died, or
/// was killed) has closed the stream: framing catches a cut mid-frame.
pub(crate) fn eof_is_close(r: Poll<io::Result<()>>) -> Poll<io::Result<()>> {
    match r {
        Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Poll::Ready(Ok(())),
        r => r,
    }
}

/// The receiving half: decrypted bytes land in a scratch buffer and are
/// copied into raw memory from there.
#[derive(Debug)]
pub struct TlsReader {
    pub(crate) io: ReadHalf<Tls>,
    scratch: Vec<u8>,
}

impl TlsReader {
    /// A reader over the TLS stream's receiving half.
    pub fn new(io: ReadHalf<Tls>) -> Self {
        TlsReader {
            io,
            scratch: vec![0; 64 * 1024],
        }
    }

    /// Reads up to `dst.len` decrypted bytes into `dst`; 0 at end of stream.
    pub async fn read_raw(&mut self, dst: super::Raw) -> io::Result<usize> {
        let n = dst.len.min(self.scratch.len());
        let k = match self.io.read(&mut self.scratch[..n]).await {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
            r => r?,
        };
        // SAFETY: `dst` is valid for `dst.len >= k` bytes (see `Raw`).
        unsafe { std::ptr::copy_nonoverlapping(self.scratch.as_ptr(), dst.ptr, k) };
        Ok(k)
    }
}

/// The sending half, and the spinning socket under it (if it spins), which
/// the link tells when replies are due.
#[derive(Debug)]
pub struct TlsWriter {
    pub(crate) io: WriteHalf<Tls>,
    pub(crate) spin: Option<Arc<SpinTcp>>,
}
