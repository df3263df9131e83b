//! TCP: one connection per (origin, target) pair, Nagle off.

use super::{Connection, PeerReader, PeerWriter};
use crate::error::{Error, Result};
use std::io;
use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpStream};

pub(super) async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| Error::io(format!("tcp bind {addr}"), e))
}

pub(super) async fn dial(addr: SocketAddr) -> io::Result<Connection> {
    let stream = TcpStream::connect(addr).await?;
    established(stream, addr)
}

pub(super) fn established(stream: TcpStream, remote: SocketAddr) -> io::Result<Connection> {
    // Small ops are latency-bound: send each frame at once.
    stream.set_nodelay(true)?;
    let (r, w) = stream.into_split();
    Ok(Connection {
        reader: PeerReader::Tcp(r),
        writer: PeerWriter::Tcp(w),
        remote,
        quic: None,
    })
}
