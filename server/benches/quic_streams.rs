//! Small-op latency over QUIC: a stream per op, or one long-lived stream
//! with request ids? Both run over the same quinn endpoints, TLS and
//! transport settings that pld uses, with the same 16-byte request and
//! 8-byte reply, the server on its own runtime thread as in a separate
//! process; latency one op at a time, and the rate with 64 ops in flight.
//! Then pld's own 8 B put and get over QUIC and TCP, in the same run, for
//! what the engine adds on top.
//!
//! `cargo bench -p pld-server --bench quic_streams [-- OPS]`

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_server::transport::{Endpoint, TransportSettings, free_loopback_port};
use pld_server::{Config, Rank, TransportKind};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const REQ: usize = 16;
const REPLY: usize = 8;

fn summary(name: &str, mut lat: Vec<Duration>) {
    lat.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = lat.iter().map(|d| us(*d)).sum::<f64>() / lat.len() as f64;
    println!(
        "{name:<40} median {:>7.1} us   p99 {:>7.1} us   mean {:>7.1} us   ({} ops)",
        us(lat[lat.len() / 2]),
        us(lat[lat.len() * 99 / 100]),
        mean,
        lat.len()
    );
}

/// Starts a QUIC server on its own runtime thread, as a separate process
/// would have it, running `serve` on the first connection.
async fn quic_server<F, Fut>(serve: F) -> (quinn::Endpoint, SocketAddr)
where
    F: FnOnce(quinn::Connection) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    // Room for a stream per op in flight (a link itself uses one).
    let s = TransportSettings::default().with_streams(256);
    let port = free_loopback_port().expect("port");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let server_settings = s.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("server runtime");
        rt.block_on(async move {
            let Ok(Endpoint::Quic(server)) =
                Endpoint::bind(TransportKind::Quic, addr, 1, &server_settings).await
            else {
                panic!("quic bind")
            };
            let _ = ready_tx.send(());
            let conn = server
                .accept()
                .await
                .expect("incoming")
                .await
                .expect("conn");
            serve(conn).await;
        });
    });
    ready_rx.await.expect("server ready");
    let Endpoint::Quic(client) = Endpoint::quic_client(&s).expect("client") else {
        unreachable!("asked for quic")
    };
    (client, addr)
}

/// One long-lived stream; requests carry ids, the server answers in order.
/// Returns per-op latencies (one at a time) and the time for `ops` ops
/// with `window` in flight.
async fn long_lived(ops: usize, window: usize) -> (Vec<Duration>, Duration) {
    let (client, addr) = quic_server(|conn| async move {
        let (mut send, mut recv) = conn.accept_bi().await.expect("stream");
        let mut req = [0u8; REQ];
        while recv.read_exact(&mut req).await.is_ok() {
            // Echo the request id (first 8 bytes) as the reply.
            if send.write_all(&req[..REPLY]).await.is_err() {
                break;
            }
        }
    })
    .await;
    let conn = client
        .connect(addr, "rank-1.pld")
        .expect("connect")
        .await
        .expect("conn");
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let mut lat = Vec::with_capacity(ops);
    let mut reply = [0u8; REPLY];
    let req = |i: usize| {
        let mut r = [0u8; REQ];
        r[..8].copy_from_slice(&(i as u64).to_le_bytes());
        r
    };
    for i in 0..ops + ops / 10 {
        let t = Instant::now();
        send.write_all(&req(i)).await.expect("send");
        recv.read_exact(&mut reply).await.expect("reply");
        assert_eq!(u64::from_le_bytes(reply), i as u64);
        if i >= ops / 10 {
            lat.push(t.elapsed());
        }
    }
    let t = Instant::now();
    let (mut sent, mut done) = (0, 0);
    while done < ops {
        if sent < ops && sent - done < window {
            send.write_all(&req(sent)).await.expect("send");
            sent += 1;
        } else {
            recv.read_exact(&mut reply).await.expect("reply");
            done += 1;
        }
    }
    (lat, t.elapsed())
}

async fn one_stream_op(conn: &quinn::Connection, i: usize) {
    let mut req = [0u8; REQ];
    req[..8].copy_from_slice(&(i as u64).to_le_bytes());
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    send.write_all(&req).await.expect("send");
    send.finish().expect("finish");
    let mut reply = [0u8; REPLY];
    recv.read_exact(&mut reply).await.expect("reply");
    assert_eq!(u64::from_le_bytes(reply), i as u64);
}

/// A fresh bidirectional stream per op, finished after the request; the
/// server answers each stream in a task of its own so that streams are
/// served concurrently, as they must be for ops to overlap.
async fn stream_per_op(ops: usize, window: usize) -> (Vec<Duration>, Duration) {
    let (client, addr) = quic_server(|conn| async move {
        while let Ok((mut send, mut recv)) = conn.accept_bi().await {
            tokio::spawn(async move {
                let mut req = [0u8; REQ];
                if recv.read_exact(&mut req).await.is_ok() {
                    let _ = send.write_all(&req[..REPLY]).await;
                    let _ = send.finish();
                }
            });
        }
    })
    .await;
    let conn = client
        .connect(addr, "rank-1.pld")
        .expect("connect")
        .await
        .expect("conn");
    let mut lat = Vec::with_capacity(ops);
    for i in 0..ops + ops / 10 {
        let t = Instant::now();
        one_stream_op(&conn, i).await;
        if i >= ops / 10 {
            lat.push(t.elapsed());
        }
    }
    let t = Instant::now();
    let mut inflight = tokio::task::JoinSet::new();
    for i in 0..ops {
        if inflight.len() == window {
            inflight.join_next().await.expect("op").expect("op task");
        }
        let conn = conn.clone();
        inflight.spawn(async move { one_stream_op(&conn, i).await });
    }
    while let Some(r) = inflight.join_next().await {
        r.expect("op task");
    }
    (lat, t.elapsed())
}

/// pld's own blocking 8 B put and get between two embedded ranks.
async fn pld_ops(t: TransportKind, ops: usize) -> (Vec<Duration>, Vec<Duration>) {
    let peers: Vec<String> = (0..2)
        .map(|_| format!("127.0.0.1:{}", free_loopback_port().expect("port")))
        .collect();
    let cfg = |r| {
        let mut c = Config::new(r, peers.clone());
        c.transport = t;
        c.security = pld_server::Security::Insecure;
        c
    };
    let (a, b) = tokio::join!(Rank::start(cfg(0)), Rank::start(cfg(1)));
    let (a, _b) = (a.expect("rank 0"), b.expect("rank 1"));
    let data = a.window("data").expect("data");
    let (mut put, mut get) = (Vec::with_capacity(ops), Vec::with_capacity(ops));
    for i in 0..ops + ops / 10 {
        let t = Instant::now();
        a.put(1, data, 0, &(i as u64).to_le_bytes())
            .await
            .expect("put");
        if i >= ops / 10 {
            put.push(t.elapsed());
        }
        let t = Instant::now();
        a.get(1, data, 0, 8).await.expect("get");
        if i >= ops / 10 {
            get.push(t.elapsed());
        }
    }
    (put, get)
}

fn main() {
    let ops: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000);
    let window = 64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        println!(
            "QUIC small ops, {REQ} B request / {REPLY} B reply, loopback, server on its own runtime"
        );
        let rate = |d: Duration| {
            format!(
                "{:>8.0} ops/s with {window} in flight",
                ops as f64 / d.as_secs_f64()
            )
        };
        // Alternate the two patterns so that drift hits both alike.
        for _ in 0..3 {
            let (lat, d) = long_lived(ops, window).await;
            summary("long-lived stream, request ids", lat);
            println!("{:<40} {}", "", rate(d));
            let (lat, d) = stream_per_op(ops, window).await;
            summary("stream per op", lat);
            println!("{:<40} {}", "", rate(d));
        }
        println!("pld blocking ops, 8 B, two embedded ranks, same run");
        for t in [TransportKind::Quic, TransportKind::Tcp] {
            let (put, get) = pld_ops(t, ops).await;
            summary(&format!("pld put 8 B ({t})"), put);
            summary(&format!("pld get 8 B ({t})"), get);
        }
    });
}
