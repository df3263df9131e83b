//! TCP: one connection per (origin, target) pair, Nagle off; under
//! [`Security::Tls`] every connection runs rustls (mutual TLS), otherwise
//! plaintext.

use super::spin::SpinTcp;
use super::tls_tcp::{TcpIo, TlsReader, TlsWriter};
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
    tls: Option<(tokio_rustls::TlsAcceptor, tokio_rustls::TlsConnector)>,
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
            s => Some((
                Arc::new(tls::server_config(rank, s)?).into(),
                Arc::new(tls::client_config(s)?).into(),
            )),
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
    let io = TcpIo::new(stream, opts.progress)?;
    let Some((_, connector)) = &opts.tls else {
        return Ok(plain(io, addr));
    };
    let name = ServerName::try_from(tls::server_name(peer)).map_err(io::Error::other)?;
    let s = connector.connect(name, io).await?;
    Ok(secured(s.into(), addr))
}

pub(super) async fn established(
    stream: TcpStream,
    remote: SocketAddr,
    opts: &TcpOpts,
) -> io::Result<Connection> {
    let io = TcpIo::new(stream, opts.progress)?;
    let Some((acceptor, _)) = &opts.tls else {
        return Ok(plain(io, remote));
    };
    let s = acceptor.accept(io).await?;
    Ok(secured(s.into(), remote))
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

fn secured(s: tokio_rustls::TlsStream<TcpIo>, remote: SocketAddr) -> Connection {
    let peer_cert = s
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.clone().into_owned());
    let spin: Option<Arc<SpinTcp>> = match s.get_ref().0 {
        TcpIo::Spin(s) => Some(s.clone()),
        TcpIo::Tokio(_) => None,
    };
    let (r, w) = tokio::io::split(s);
    Connection {
        reader: PeerReader::Tls(Box::new(TlsReader::new(r))),
        writer: PeerWriter::Tls(TlsWriter { io: w, spin }),
        remote,
        quic: None,
        peer_cert,
    }
}
