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
mod reader;
mod record;
#[cfg(test)]
mod tests;
mod writer;

pub use reader::TlsReader;
pub use writer::TlsWriter;

use super::spin::SpinTcp;
use crate::config::Progress;
use handshake::{Done, Kernel, tls_error};
use record::{Direction, MAX_SEALED};
use rustls::pki_types::{CertificateDer, ServerName};
use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
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
