//! TCP: one connection per (origin, target) pair, Nagle off; under
//! [`Security::Tls`] every connection runs rustls (mutual TLS), otherwise
//! plaintext.

use super::tls_tcp::{self, TcpIo};
use super::{Connection, PeerReader, PeerWriter};
use crate::config::Progress;
use crate::error::{Error, Result};
use crate::tls::{self, Security};
use rustls::pki_types::ServerName;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

/// How a TCP endpoint makes connections: its progress mode and TLS.
#[derive(Clone)]
pub struct TcpOpts {
    /// Sleep on the reactor or busy-poll.
    pub progress: Progress,
    tls: Option<(Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>)>,
}

impl std::fmt::Debug for TcpOpts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpOpts")
            .field("progress", &self.progress)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl TcpOpts {
    pub(super) fn new(rank: u32, progress: Progress, security: &Security) -> Result<TcpOpts> {
        let tls = match security {
            Security::Insecure => None,
            s => Some(tls_tcp::configs(rank, s)?),
        };
        Ok(TcpOpts { progress, tls })
    }
}

pub(super) async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| Error::io(format!("tcp bind {addr}"), e))
}

pub(super) async fn dial(addr: SocketAddr, peer: u32, opts: &TcpOpts) -> io::Result<Connection> {
    let stream = TcpStream::connect(addr).await?;
    let Some((_, client)) = &opts.tls else {
        return Ok(plain(TcpIo::new(stream, opts.progress)?, addr));
    };
    let name = ServerName::try_from(tls::server_name(peer)).map_err(io::Error::other)?;
    let halves = tls_tcp::connect(stream, client.clone(), name, opts.progress).await?;
    Ok(secured(halves, addr))
}

pub(super) async fn established(
    stream: TcpStream,
    remote: SocketAddr,
    opts: &TcpOpts,
) -> io::Result<Connection> {
    let Some((server, _)) = &opts.tls else {
        return Ok(plain(TcpIo::new(stream, opts.progress)?, remote));
    };
    let halves = tls_tcp::accept(stream, server.clone(), opts.progress).await?;
    Ok(secured(halves, remote))
}

fn plain(io: TcpIo, remote: SocketAddr) -> Connection {
    let (reader, writer) = match io {
        TcpIo::Tokio(stream) => {
            let (r, w) = stream.into_split();
            (PeerReader::Tcp(r), PeerWriter::Tcp(w))
        }
        TcpIo::Spin(s) => (PeerReader::Spin(s.clone()), PeerWriter::Spin(s)),
    };
    Connection {
        reader,
        writer,
        remote,
        quic: None,
        peer_cert: None,
    }
}

fn secured(
    (reader, writer, peer_cert): (
        tls_tcp::TlsReader,
        tls_tcp::TlsWriter,
        Option<rustls::pki_types::CertificateDer<'static>>,
    ),
    remote: SocketAddr,
) -> Connection {
    Connection {
        reader: PeerReader::Tls(Box::new(reader)),
        writer: PeerWriter::Tls(Box::new(writer)),
        remote,
        quic: None,
        peer_cert,
    }
}
