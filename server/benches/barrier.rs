//! Barrier latency at P = 2, 4, 8, 16 ranks on one machine, each rank on a
//! thread and runtime of its own (as separate processes would have it),
//! next to the same run's raw round trip on the same transport: 8 bytes
//! there and back over a plain TCP connection or a plain quinn stream with
//! pld's QUIC settings.
//!
//! `cargo bench -p pld-server --bench barrier [-- RANKS...]` (default 2 4 8 16)

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_server::transport::{Endpoint, TransportSettings, free_loopback_port};
use pld_server::{Config, Rank, TransportKind};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn iters_for(p: usize) -> usize {
    match p {
        0..=2 => 5000,
        3..=4 => 2000,
        5..=8 => 1000,
        _ => 400,
    }
}

/// Mean barrier latency at rank 0 over `iters` barriers after a warm-up.
fn barrier_latency(t: TransportKind, p: usize) -> Duration {
    let peers: Vec<String> = (0..p)
        .map(|_| format!("127.0.0.1:{}", free_loopback_port().expect("port")))
        .collect();
    let iters = iters_for(p);
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..p as u32)
        .map(|r| {
            let peers = peers.clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                runtime().block_on(async move {
                    let mut c = Config::new(r, peers);
                    c.transport = t;
                    c.windows = vec!["data=64KiB".parse().expect("window")];
                    // As MPI: no authentication (QUIC still encrypts).
                    c.security = pld_server::Security::Insecure;
                    let rank = Rank::start(c).await.expect("rank");
                    for _ in 0..iters / 10 {
                        rank.barrier().await.expect("barrier");
                    }
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        rank.barrier().await.expect("barrier");
                    }
                    if r == 0 {
                        let _ = tx.send(t0.elapsed() / iters as u32);
                    }
                    rank.shutdown().await;
                })
            })
        })
        .collect();
    let lat = rx.recv().expect("rank 0 result");
    for th in threads {
        th.join().expect("rank thread");
    }
    lat
}

/// Mean round trip of 8 bytes over a plain connection of the transport.
fn raw_round_trip(t: TransportKind, iters: usize) -> Duration {
    let port = free_loopback_port().expect("port");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        runtime().block_on(async move {
            match t {
                TransportKind::Tcp => {
                    let l = tokio::net::TcpListener::bind(addr).await.expect("bind");
                    let _ = ready_tx.send(());
                    let (mut s, _) = l.accept().await.expect("accept");
                    s.set_nodelay(true).expect("nodelay");
                    let mut b = [0u8; 8];
                    while s.read_exact(&mut b).await.is_ok() {
                        if s.write_all(&b).await.is_err() {
                            break;
                        }
                    }
                }
                TransportKind::Quic => {
                    let s = TransportSettings::default();
                    let Ok(Endpoint::Quic(e)) = Endpoint::bind(t, addr, 1, &s).await else {
                        panic!("quic bind")
                    };
                    let _ = ready_tx.send(());
                    let conn = e.accept().await.expect("incoming").await.expect("conn");
                    let (mut send, mut recv) = conn.accept_bi().await.expect("stream");
                    let mut b = [0u8; 8];
                    while recv.read_exact(&mut b).await.is_ok() {
                        if send.write_all(&b).await.is_err() {
                            break;
                        }
                    }
                }
            }
        })
    });
    ready_rx.recv().expect("server ready");
    let lat = runtime().block_on(async move {
        let mut b = [7u8; 8];
        let warm = iters / 10;
        let mut t0 = Instant::now();
        match t {
            TransportKind::Tcp => {
                let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
                s.set_nodelay(true).expect("nodelay");
                for i in 0..iters + warm {
                    if i == warm {
                        t0 = Instant::now();
                    }
                    s.write_all(&b).await.expect("send");
                    s.read_exact(&mut b).await.expect("recv");
                }
            }
            TransportKind::Quic => {
                let Endpoint::Quic(e) =
                    Endpoint::quic_client(&TransportSettings::default()).expect("client")
                else {
                    unreachable!("asked for quic")
                };
                let conn = e
                    .connect(addr, "rank-1.pld")
                    .expect("connect")
                    .await
                    .expect("conn");
                let (mut send, mut recv) = conn.open_bi().await.expect("stream");
                for i in 0..iters + warm {
                    if i == warm {
                        t0 = Instant::now();
                    }
                    send.write_all(&b).await.expect("send");
                    recv.read_exact(&mut b).await.expect("recv");
                }
            }
        }
        t0.elapsed() / iters as u32
    });
    server.join().expect("server thread");
    lat
}

fn main() {
    let ranks: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ranks = if ranks.is_empty() {
        vec![2, 4, 8, 16]
    } else {
        ranks
    };
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    // A dissemination round is one one-way message: compare a barrier with
    // rounds x half a round trip.
    println!("transport  P   barrier (mean)   raw round trip   barrier / (rounds x rtt/2)");
    for t in [TransportKind::Tcp, TransportKind::Quic] {
        let rtt = raw_round_trip(t, 20_000);
        for &p in &ranks {
            let lat = barrier_latency(t, p);
            let rounds = pld_proto::barrier::rounds(p as u32).max(1) as f64;
            println!(
                "{:<9} {p:>2}   {:>10.1} us    {:>10.1} us    {:>6.2}",
                t.to_string(),
                us(lat),
                us(rtt),
                us(lat) / (rounds * us(rtt) / 2.0)
            );
        }
    }
}
