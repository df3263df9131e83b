//! The client plane against clients that misbehave, over real sockets:
//! idle and garbage connections are closed at the handshake deadline, the
//! connection cap refuses and says so, running out of file descriptors
//! backs off instead of spinning, a stalled GetStream is cancelled with a
//! status that says so (the budget: `streams.rs`), TLS is never
//! silently dropped, and no client's timeout can panic a handler.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use pld_client::{Client, ClientOptions};
use pld_grpc::pld_client::PldClient;
use pld_proto::v1::{BarrierRequest, Cmp as PbCmp, GetStreamRequest, WaitRequest};
use pld_server::TransportKind;
use pld_tests::{Daemon, GrpcCluster, loopback_peers, run};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads until the server closes the connection; how long that took, or
/// `None` if it stayed open for `within`.
async fn closed_within(s: &mut TcpStream, within: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(within, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return t0.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
}

/// Waits (10 s at most) until the daemon's threads are runnable under
/// half the time over 2 s: never, for a daemon with a spinning thread.
async fn not_spinning(d: &Daemon, when: &str) {
    let settle = Instant::now() + Duration::from_secs(10);
    loop {
        let share = d.runnable_share(Duration::from_secs(2)).await;
        if share < 0.5 {
            return;
        }
        assert!(
            Instant::now() < settle,
            "the daemon's threads are runnable {:.0} % of the time {when}: it spins",
            share * 100.0
        );
    }
}

/// `GET /metrics` on `addr`: the answer, or why there was none.
async fn scrape(addr: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut body))
        .await
        .map_err(|_| "no answer in 10 s".to_string())?
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

async fn connect(addr: &str) -> TcpStream {
    TcpStream::connect(addr).await.expect("connect")
}

#[test]
fn idle_and_garbage_connections_are_closed_at_the_handshake_deadline() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 1, &["--grpc-handshake-timeout", "1s"]);
        let addr = c.grpc[0].clone();
        let mut idle = Vec::new();
        for _ in 0..20 {
            idle.push(connect(&addr).await);
        }
        let mut garbage = Vec::new();
        for _ in 0..5 {
            let mut s = connect(&addr).await;
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            garbage.push(s);
        }
        // A real client is served meanwhile.
        let cl = Client::connect(&addr).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(0, data, 0, b"served").await.unwrap();
        for s in idle.iter_mut().chain(garbage.iter_mut()) {
            let took = closed_within(s, Duration::from_secs(10))
                .await
                .expect("the daemon closes a connection that sends no HTTP/2 preface");
            // The deadline is 1 s; 8 s leaves a loaded machine room and is
            // still far below a connection that nothing closes (10 s here).
            assert!(took < Duration::from_secs(8), "closed only after {took:?}");
        }
        assert_eq!(&cl.get(0, data, 0, 6).await.unwrap()[..], b"served");
    });
}

#[test]
fn the_connection_cap_closes_extra_connections_at_once_and_says_so() {
    run(Duration::from_secs(60), async {
        let mut c = GrpcCluster::start(
            TransportKind::Tcp,
            1,
            &[
                "--grpc-max-connections",
                "4",
                "--grpc-handshake-timeout",
                "30s",
            ],
        );
        let addr = c.grpc[0].clone();
        // Four clients that made a call hold the four slots: proven
        // connections are never taken for a newcomer
        // (`adversarial.rs` has the unproven ones).
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(Client::connect(&addr).await.unwrap());
        }
        let opts = ClientOptions {
            wait_ready: Duration::ZERO,
            ..ClientOptions::default()
        };
        let t0 = Instant::now();
        let refused = Client::connect_with(&addr, opts.clone()).await;
        assert!(refused.is_err(), "a fifth client got in");
        for _ in 0..10 {
            let mut s = connect(&addr).await;
            let took = closed_within(&mut s, Duration::from_secs(5))
                .await
                .expect("a connection over the cap is closed at once");
            // At once: far below the 30 s handshake deadline that would
            // close it otherwise (the margin is for a loaded machine).
            assert!(took < Duration::from_secs(10), "{took:?}");
        }
        let burst = t0.elapsed();
        // The four still work.
        let data = held[0].window("data").unwrap();
        held[3].put(0, data, 0, b"held").await.unwrap();
        // Slots free as the daemon sees their connections close.
        drop(held);
        let deadline = Instant::now() + Duration::from_secs(10);
        let cl = loop {
            match Client::connect_with(&addr, opts.clone()).await {
                Ok(cl) => break cl,
                Err(e) => assert!(Instant::now() < deadline, "no slot came free: {e}"),
            }
        };
        assert_eq!(cl.rank(), 0);
        let log = c.daemon(0).kill_and_stderr_now();
        let lines = log
            .lines()
            .filter(|l| l.contains("refused a gRPC client connection"))
            .count();
        // At least eleven refusals (a client may retry), logged at most
        // once a second: as many lines as seconds the burst began in.
        let most = burst.as_secs() as usize + 1;
        assert!(
            (1..=most).contains(&lines),
            "refusals over {burst:?}: {lines} lines\n{log}"
        );
    });
}

#[test]
fn running_out_of_file_descriptors_backs_off_instead_of_spinning() {
    run(Duration::from_secs(90), async {
        let peers = loopback_peers(1);
        let grpc = loopback_peers(1).remove(0);
        let mut cmd = std::process::Command::new("bash");
        cmd.args([
            "-c",
            "ulimit -n 64 && exec \"$0\" \"$@\"",
            pld_tests::daemon_bin().to_str().unwrap(),
        ])
        .args(Daemon::args(
            0,
            &peers,
            TransportKind::Tcp,
            &[
                "--grpc",
                &grpc,
                "--grpc-max-connections",
                "1000",
                "--grpc-handshake-timeout",
                "60s",
            ],
        ))
        .env("RUST_LOG", "info");
        let mut d = Daemon::start(0, cmd);
        d.wait_ready(Duration::from_secs(30));
        // More connections than the daemon has descriptors for: the kernel
        // completes them, and accept fails with EMFILE.
        let mut held = Vec::new();
        for _ in 0..100 {
            held.push(connect(&grpc).await);
        }
        // Let the accept loop meet the limit. A loop that backs off is
        // runnable a small share of the time, one that spins all of it
        // however loaded the machine (`Daemon::runnable_share`).
        not_spinning(&d, "while out of descriptors").await;
        assert!(d.alive());
        // Descriptors come back: the daemon serves again.
        drop(held);
        let cl = Client::connect(&grpc).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(0, data, 0, b"back").await.unwrap();
        let log = d.kill_and_stderr_now();
        assert!(
            log.contains("cannot accept gRPC clients") && log.contains("Too many open files"),
            "the shortage is logged:\n{log}"
        );
    });
}

#[test]
fn idle_connections_to_the_metrics_port_are_capped_and_lock_out_neither_scrapes_nor_clients() {
    run(Duration::from_secs(120), async {
        let peers = loopback_peers(1);
        let grpc = loopback_peers(1).remove(0);
        let metrics = loopback_peers(1).remove(0);
        let mut cmd = std::process::Command::new("bash");
        cmd.args([
            "-c",
            "ulimit -n 128 && exec \"$0\" \"$@\"",
            pld_tests::daemon_bin().to_str().unwrap(),
        ])
        .args(Daemon::args(
            0,
            &peers,
            TransportKind::Tcp,
            &["--grpc", &grpc, "--metrics", &metrics],
        ))
        .env("RUST_LOG", "info");
        let mut d = Daemon::start(0, cmd);
        d.wait_ready(Duration::from_secs(30));
        assert!(scrape(&metrics).await.unwrap().contains("pld_ready"));
        // More idle connections than the daemon has descriptors for.
        let mut idle = Vec::new();
        for _ in 0..400 {
            idle.push(connect(&metrics).await);
        }
        // Meanwhile the daemon does not spin (one window, at once: the
        // answer deadline would free the descriptors after 5 s), and a
        // client of the gRPC port gets in without waiting.
        let share = d.runnable_share(Duration::from_secs(2)).await;
        assert!(
            share < 0.5,
            "the daemon's threads are runnable {:.0} % of the time with 400 idle metrics connections: it spins",
            share * 100.0
        );
        let opts = ClientOptions {
            wait_ready: Duration::ZERO,
            ..ClientOptions::default()
        };
        let cl = Client::connect_with(&grpc, opts).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(0, data, 0, b"in").await.unwrap();
        // All but the cap's were closed at once, not held for the answer
        // deadline.
        let mut closed = 0;
        for s in idle.iter_mut() {
            if closed_within(s, Duration::from_millis(50)).await.is_some() {
                closed += 1;
            }
        }
        let cap = pld_daemon::metrics::MAX_CONNECTIONS;
        assert!(
            closed >= 400 - cap,
            "only {closed} of 400 idle connections closed at once"
        );
        let mut more = Vec::new();
        for _ in 0..100 {
            more.push(connect(&metrics).await);
        }
        // Those hold every slot for a second; past it a scrape takes the
        // oldest one's (a scraper that retries, as Prometheus does at its
        // next interval, gets in however many idle connections there are).
        let until = Instant::now() + Duration::from_secs(10);
        let page = loop {
            match scrape(&metrics).await {
                Ok(page) if page.contains("200 OK") => break page,
                other => assert!(Instant::now() < until, "no scrape answered: {other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(page.contains("pld_ready{rank=\"0\"} 1"), "{page}");
        drop((idle, more));
        let log = d.kill_and_stderr_now();
        assert!(
            log.contains("refused a metrics connection"),
            "the refusals are logged:\n{log}"
        );
    });
}

#[test]
fn a_stalled_get_stream_is_cancelled_with_a_status_that_says_so() {
    run(Duration::from_secs(60), async {
        // The client below stops reading, and reads again once the daemon
        // counts the stream stalled (pld_grpc_streams_stalled_total): no
        // sleep has to outlast the daemon's timer on a loaded machine.
        let (c, metrics) = common::metered(TransportKind::Tcp, 1, &["--grpc-stall-timeout", "3s"]);
        let addr = c.grpc[0].clone();
        let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let request = || GetStreamRequest {
            rank: 0,
            window: "data".into(),
            offset: 0,
            len: 16 << 20,
            region: None,
            chunking: None,
        };
        // One message, then nothing until the daemon has cancelled the
        // stream (past the stall timeout; long before twice it, when the
        // connection goes): the data still buffered, then the status.
        let mut s = PldClient::new(channel.clone())
            .get_stream(request())
            .await
            .unwrap()
            .into_inner();
        assert!(s.message().await.unwrap().is_some());
        let stalled = || {
            let metrics = metrics.clone();
            async move {
                let body = common::scrape(&metrics).await;
                common::metric(&body, "pld_grpc_streams_stalled_total{rank=\"0\"}")
            }
        };
        let t0 = Instant::now();
        while stalled().await < 1.0 {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the stalled stream was not cancelled"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Not at once: the timer ran (its start is the daemon's last
        // progress, a little before this client's first read).
        assert!(
            t0.elapsed() >= Duration::from_secs(2),
            "cancelled after {:?}, long before the 3 s stall timeout",
            t0.elapsed()
        );
        let status = loop {
            match s.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the stream ended as if complete"),
                Err(status) => break status,
            }
        };
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
        assert!(
            status.message().contains("read nothing for 3s")
                && status.message().contains("--grpc-stall-timeout"),
            "{status:?}"
        );
        // A client that never reads again loses its connection after twice
        // the stall timeout; the daemon serves new ones.
        let mut s = PldClient::new(channel.clone())
            .get_stream(request())
            .await
            .unwrap()
            .into_inner();
        assert!(s.message().await.unwrap().is_some());
        tokio::time::sleep(Duration::from_secs(8)).await;
        let mut ended = false;
        for _ in 0..1000 {
            match s.message().await {
                Ok(Some(_)) => continue,
                _ => {
                    ended = true;
                    break;
                }
            }
        }
        assert!(ended, "the stalled stream did not end");
        let cl = Client::connect(&addr).await.unwrap();
        assert_eq!(cl.rank(), 0);
    });
}

#[test]
fn grpc_tls_with_its_own_certificate_works_on_an_insecure_peer_plane() {
    run(Duration::from_secs(60), async {
        let dir = pld_server::tls::TempTlsDir::new(1).unwrap();
        let cert = dir.path().join("grpc.pem");
        let key = dir.path().join("grpc.key");
        let ca = std::fs::read(dir.path().join("ca.pem")).unwrap();
        let c = GrpcCluster::start(
            TransportKind::Tcp,
            1,
            &[
                "--insecure",
                "--grpc-tls",
                "--grpc-cert",
                cert.to_str().unwrap(),
                "--grpc-key",
                key.to_str().unwrap(),
            ],
        );
        let addr = c.grpc[0].clone();
        let tls = ClientOptions {
            tls_ca: Some(ca),
            tls_domain: Some("localhost".into()),
            ..ClientOptions::default()
        };
        let cl = Client::connect_with(&addr, tls).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(0, data, 0, b"over tls").await.unwrap();
        // Plaintext is refused: the port speaks TLS only.
        let plain = ClientOptions {
            wait_ready: Duration::ZERO,
            ..ClientOptions::default()
        };
        match Client::connect_with(&addr, plain).await {
            Err(pld_client::Error::Connect { reason, .. }) => {
                assert!(
                    reason.contains("(--grpc-tls), connect with its CA"),
                    "{reason}"
                );
            }
            other => panic!("plaintext to a TLS-only port: {other:?}"),
        }
    });
}

#[test]
fn no_timeout_a_client_asks_for_panics_its_handler() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 1, &["--sync-timeout", "24h"]);
        let channel = tonic::transport::Channel::from_shared(format!("http://{}", c.grpc[0]))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut pld = PldClient::new(channel);
        // A cell that already holds 0 satisfies `== 0` at once.
        let w = pld
            .wait(WaitRequest {
                window: "signal".into(),
                offset: 0,
                cmp: PbCmp::Eq as i32,
                value: 0,
                timeout_ms: u64::MAX,
            })
            .await
            .unwrap();
        assert_eq!(w.into_inner().value, 0);
        for timeout_ms in [0, u64::MAX] {
            pld.barrier(BarrierRequest { timeout_ms }).await.unwrap();
        }
    });
}

// A client that died without closing (here: one that sent its preface and
// settings and then answers nothing, not even pings) loses its connection
// to HTTP/2 keep-alive: pinged after --grpc-keepalive idle, closed when it
// does not answer within half as long. Nothing else would close it (the
// handshake deadline is long past its preface).
#[test]
fn http2_keepalive_reaps_a_client_that_answers_no_ping() {
    run(Duration::from_secs(60), async {
        let (c, metrics) = common::metered(
            TransportKind::Tcp,
            1,
            &[
                "--grpc-keepalive",
                "500ms",
                "--grpc-handshake-timeout",
                "30s",
            ],
        );
        let mut s = connect(&c.grpc[0]).await;
        s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        // An empty SETTINGS frame: 9 bytes of header, length 0, type 4.
        s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
        let took = closed_within(&mut s, Duration::from_secs(30))
            .await
            .expect("the dead client's connection is closed");
        // Not at once: only after a ping went unanswered (the margin
        // above is for a loaded machine).
        assert!(took >= Duration::from_millis(500), "closed after {took:?}");
        // A live client is not reaped: it answers the pings. Its calls
        // alone cannot show it (a client reconnects by itself), so the
        // daemon's own count of open connections is read: after four
        // keep-alive intervals, the live client's connection is still
        // the one open (a reaped one would be 0 until the next call).
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(0, data, 0, b"alive").await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let body = common::scrape(&metrics).await;
        assert_eq!(
            common::metric(&body, "pld_grpc_connections{rank=\"0\"}"),
            1.0,
            "{body}"
        );
        assert_eq!(
            common::metric(&body, "pld_grpc_handshakes_failed_total{rank=\"0\"}"),
            0.0,
            "{body}"
        );
        cl.put(0, data, 0, b"alive").await.unwrap();
    });
}
