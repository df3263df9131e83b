//! The transport's raw floor: a plain round trip and a plain single-stream
//! bulk transfer, with nothing of pld's on top, against a child process.
//!
//! Two implementations. `Tokio` runs over pld's own transport layer (the
//! same TCP, spinning TCP or QUIC sockets, without frames or the rank
//! engine), on a current-thread runtime. `Thread` is a dedicated OS thread
//! busy-polling plain non-blocking sockets — the floor a spinning design
//! could reach without tokio. Comparing the two answers whether spinning
//! fits inside tokio.

use pld_server::transport::{Connection, Endpoint, TransportSettings};
use pld_server::{Progress, TransportKind};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How the raw endpoints are driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    Tokio,
    Thread,
}

impl std::str::FromStr for Impl {
    type Err = String;
    fn from_str(s: &str) -> Result<Impl, String> {
        match s {
            "tokio" => Ok(Impl::Tokio),
            "thread" => Ok(Impl::Thread),
            _ => Err(format!("unknown raw implementation {s}")),
        }
    }
}

const CHUNK: usize = 1 << 20;

/// As a pld rank on loopback has them (GSO off), so that the floor is
/// measured under the same QUIC settings.
fn settings(progress: Progress) -> TransportSettings {
    TransportSettings::default()
        .with_progress(progress)
        .with_segmentation_offload(false)
}

/// Keeps a current-thread runtime polling (the QUIC spin of pld).
fn spin_runtime(kind: TransportKind, progress: Progress) {
    if kind == TransportKind::Quic && matches!(progress, Progress::Spin { .. }) {
        tokio::spawn(async {
            loop {
                tokio::task::yield_now().await;
            }
        });
    }
}

/// The server: one connection at a time; the first byte says what to do:
/// `e` echo 8-byte messages, `s` sink N bytes then ack, `g` send N bytes.
pub async fn serve(
    kind: TransportKind,
    progress: Progress,
    how: Impl,
    addr: SocketAddr,
) -> anyhow::Result<()> {
    if how == Impl::Thread {
        return serve_thread(addr);
    }
    spin_runtime(kind, progress);
    let endpoint = Endpoint::bind(kind, addr, 1, &settings(progress)).await?;
    println!("ready");
    while let Some(incoming) = endpoint.accept().await {
        let Connection {
            mut reader,
            mut writer,
            ..
        } = incoming.establish().await?;
        let mut cmd = [0u8; 9];
        if reader.read_exact(&mut cmd).await.is_err() {
            continue;
        }
        let n = u64::from_le_bytes(cmd[1..].try_into()?) as usize;
        let mut buf = vec![0u8; CHUNK];
        match cmd[0] {
            b'e' => {
                let mut m = [0u8; 8];
                while reader.read_exact(&mut m).await.is_ok() {
                    writer.write_all(&m).await?;
                }
            }
            b's' => {
                let mut left = n;
                while left > 0 {
                    let k = reader.read(&mut buf[..left.min(CHUNK)]).await?;
                    anyhow::ensure!(k > 0, "client left early");
                    left -= k;
                }
                writer.write_all(b"k").await?;
            }
            _ => {
                let mut left = n;
                while left > 0 {
                    let k = left.min(CHUNK);
                    writer.write_all(&buf[..k]).await?;
                    left -= k;
                }
            }
        }
        let _ = writer.shutdown().await;
        let mut rest = [0u8; 64];
        while matches!(reader.read(&mut rest).await, Ok(k) if k > 0) {}
    }
    Ok(())
}

async fn connect(
    kind: TransportKind,
    progress: Progress,
    addr: SocketAddr,
) -> anyhow::Result<(Endpoint, Connection)> {
    spin_runtime(kind, progress);
    let s = settings(progress);
    let endpoint = match kind {
        TransportKind::Quic => Endpoint::quic_client(&s)?,
        TransportKind::Tcp => Endpoint::bind(kind, "127.0.0.1:0".parse()?, 0, &s).await?,
    };
    let conn = endpoint.dial(addr, 1).await?;
    Ok((endpoint, conn))
}

fn command(c: u8, n: u64) -> [u8; 9] {
    let mut m = [c; 9];
    m[1..].copy_from_slice(&n.to_le_bytes());
    m
}

/// Mean round trip of 8 bytes.
pub async fn rtt(
    kind: TransportKind,
    progress: Progress,
    how: Impl,
    addr: SocketAddr,
    iters: usize,
) -> anyhow::Result<Duration> {
    if how == Impl::Thread {
        return tokio::task::spawn_blocking(move || rtt_thread(addr, iters)).await?;
    }
    let (
        _e,
        Connection {
            mut reader,
            mut writer,
            ..
        },
    ) = connect(kind, progress, addr).await?;
    writer.write_all(&command(b'e', 0)).await?;
    let mut m = [7u8; 8];
    let warm = iters / 10;
    let mut t0 = Instant::now();
    for i in 0..iters + warm {
        if i == warm {
            t0 = Instant::now();
        }
        writer.write_all(&m).await?;
        reader.read_exact(&mut m).await?;
    }
    let d = t0.elapsed() / iters as u32;
    let _ = writer.shutdown().await;
    Ok(d)
}

/// Single-stream bandwidth in MB/s: `put` streams to the server, otherwise
/// from it.
pub async fn bw(
    kind: TransportKind,
    progress: Progress,
    how: Impl,
    addr: SocketAddr,
    bytes: u64,
    put: bool,
) -> anyhow::Result<f64> {
    if how == Impl::Thread {
        return tokio::task::spawn_blocking(move || bw_thread(addr, bytes, put)).await?;
    }
    let (
        _e,
        Connection {
            mut reader,
            mut writer,
            ..
        },
    ) = connect(kind, progress, addr).await?;
    let t0 = Instant::now();
    let buf = vec![5u8; CHUNK];
    if put {
        writer.write_all(&command(b's', bytes)).await?;
        let mut left = bytes as usize;
        while left > 0 {
            let k = left.min(CHUNK);
            writer.write_all(&buf[..k]).await?;
            left -= k;
        }
        let mut ack = [0u8; 1];
        reader.read_exact(&mut ack).await?;
    } else {
        writer.write_all(&command(b'g', bytes)).await?;
        let mut sink = vec![0u8; CHUNK];
        let mut left = bytes as usize;
        while left > 0 {
            let k = reader.read(&mut sink[..left.min(CHUNK)]).await?;
            anyhow::ensure!(k > 0, "server left early");
            left -= k;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let _ = writer.shutdown().await;
    Ok(bytes as f64 / secs / 1e6)
}

/// Busy-polls a non-blocking socket until `f` makes progress; gives the
/// CPU away (sched_yield) after 20 µs without any, for oversubscribed hosts.
fn spin<T>(mut f: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    let mut since: Option<Instant> = None;
    loop {
        match f() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let s = *since.get_or_insert_with(Instant::now);
                if s.elapsed() > Duration::from_micros(20) {
                    std::thread::yield_now();
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

fn read_exact(s: &mut TcpStream, mut buf: &mut [u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        let n = spin(|| s.read(buf))?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
    }
    Ok(())
}

fn write_all(s: &mut TcpStream, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        let n = spin(|| s.write(buf))?;
        buf = &buf[n..];
    }
    Ok(())
}

fn serve_thread(addr: SocketAddr) -> anyhow::Result<()> {
    let l = TcpListener::bind(addr)?;
    println!("ready");
    for s in l.incoming() {
        let mut s = s?;
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        let mut cmd = [0u8; 9];
        if read_exact(&mut s, &mut cmd).is_err() {
            continue;
        }
        let n = u64::from_le_bytes(cmd[1..].try_into()?) as usize;
        let mut buf = vec![0u8; CHUNK];
        match cmd[0] {
            b'e' => {
                let mut m = [0u8; 8];
                while read_exact(&mut s, &mut m).is_ok() {
                    write_all(&mut s, &m)?;
                }
            }
            b's' => {
                let mut left = n;
                while left > 0 {
                    let k = spin(|| s.read(&mut buf[..left.min(CHUNK)]))?;
                    anyhow::ensure!(k > 0, "client left early");
                    left -= k;
                }
                write_all(&mut s, b"k")?;
            }
            _ => {
                let mut left = n;
                while left > 0 {
                    let k = left.min(CHUNK);
                    write_all(&mut s, &buf[..k])?;
                    left -= k;
                }
            }
        }
    }
    Ok(())
}

fn rtt_thread(addr: SocketAddr, iters: usize) -> anyhow::Result<Duration> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    write_all(&mut s, &command(b'e', 0))?;
    let mut m = [7u8; 8];
    let warm = iters / 10;
    let mut t0 = Instant::now();
    for i in 0..iters + warm {
        if i == warm {
            t0 = Instant::now();
        }
        write_all(&mut s, &m)?;
        read_exact(&mut s, &mut m)?;
    }
    Ok(t0.elapsed() / iters as u32)
}

fn bw_thread(addr: SocketAddr, bytes: u64, put: bool) -> anyhow::Result<f64> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    let t0 = Instant::now();
    let mut buf = vec![5u8; CHUNK];
    if put {
        write_all(&mut s, &command(b's', bytes))?;
        let mut left = bytes as usize;
        while left > 0 {
            let k = left.min(CHUNK);
            write_all(&mut s, &buf[..k])?;
            left -= k;
        }
        read_exact(&mut s, &mut buf[..1])?;
    } else {
        write_all(&mut s, &command(b'g', bytes))?;
        let mut left = bytes as usize;
        while left > 0 {
            let k = spin(|| s.read(&mut buf[..left.min(CHUNK)]))?;
            anyhow::ensure!(k > 0, "server left early");
            left -= k;
        }
    }
    Ok(bytes as f64 / t0.elapsed().as_secs_f64() / 1e6)
}
