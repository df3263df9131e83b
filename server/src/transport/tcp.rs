//! TCP: one connection per (origin, target) pair, Nagle off.

use super::spin::SpinTcp;
use super::{Connection, PeerReader, PeerWriter};
use crate::config::Progress;
use crate::error::{Error, Result};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

pub(super) async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| Error::io(format!("tcp bind {addr}"), e))
}

pub(super) async fn dial(addr: SocketAddr, progress: Progress) -> io::Result<Connection> {
    let stream = TcpStream::connect(addr).await?;
    established(stream, addr, progress)
}

pub(super) fn established(
    stream: TcpStream,
    remote: SocketAddr,
    progress: Progress,
) -> io::Result<Connection> {
    // Small ops are latency-bound: send each frame at once.
    stream.set_nodelay(true)?;
    let (reader, writer) = match progress {
        Progress::Sleep => {
            let (r, w) = stream.into_split();
            (PeerReader::Tcp(r), PeerWriter::Tcp(w))
        }
        Progress::Spin { idle } => {
            let s = Arc::new(SpinTcp::new(stream.into_std()?, idle)?);
            (PeerReader::Spin(s.clone()), PeerWriter::Spin(s))
        }
    };
    Ok(Connection {
        reader,
        writer,
        remote,
        quic: None,
    })
}
