//! PutStream and GetStream against clients that stall, over real sockets:
//! the buffer budget (`--grpc-buffer-budget`) is what bounds the daemon's
//! memory, a stream whose client stalls half-way holds none of it, the
//! streams that move are served meanwhile, and a stalled stream is
//! cancelled at the stall timeout with a status that says so.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use pld_client::Client;
use pld_grpc::pld_client::PldClient;
use pld_proto::v1::{GetStreamRequest, PutStreamHeader, PutStreamRequest};
use pld_server::TransportKind;
use pld_tests::{GrpcCluster, pattern, run};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

const MIB: u64 = 1 << 20;

async fn channel(addr: &str) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// A PutStream of `len` bytes at `offset` of window `data` whose client
/// sends `sent` (the first of `bytes`) in 1 MiB messages and then nothing,
/// holding the stream open: the sender to drop, and the call's outcome.
async fn stalled_put(
    addr: &str,
    offset: u64,
    len: u64,
    bytes: &[u8],
) -> (
    mpsc::Sender<PutStreamRequest>,
    tokio::task::JoinHandle<Result<(), tonic::Status>>,
) {
    let (tx, rx) = mpsc::channel(64);
    let header = PutStreamHeader {
        rank: 0,
        window: "data".into(),
        offset,
        len,
        ..Default::default()
    };
    tx.send(PutStreamRequest {
        header: Some(header),
        data: Default::default(),
    })
    .await
    .unwrap();
    for piece in bytes.chunks(MIB as usize) {
        let data = piece.to_vec().into();
        tx.send(PutStreamRequest { header: None, data })
            .await
            .unwrap();
    }
    let mut cl = PldClient::new(channel(addr).await);
    let call =
        tokio::spawn(async move { cl.put_stream(ReceiverStream::new(rx)).await.map(|_| ()) });
    (tx, call)
}

/// Polls `cond` until it holds; panics with `what` after `within`.
async fn eventually<F: std::future::Future<Output = bool>>(
    within: Duration,
    what: &str,
    mut cond: impl FnMut() -> F,
) {
    let deadline = Instant::now() + within;
    while !cond().await {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// On the landed build each stalled stream held a whole 8 MiB block of the
// budget until its client came back — forever — and every other stream
// waited for the budget until its deadline.
#[test]
fn stalled_put_streams_hold_no_budget_and_the_streams_that_move_are_served() {
    run(Duration::from_secs(180), async {
        let args = [
            "--window",
            "data=128MiB",
            "--window",
            "signal=64KiB",
            "--grpc-buffer-budget",
            "64MiB",
            "--grpc-stall-timeout",
            "1h",
        ];
        let (c, metrics) = common::metered(TransportKind::Tcp, 1, &args);
        let addr = c.grpc[0].clone();
        // Twelve streams send 7 of their 8 MiB and go quiet: twelve blocks
        // would be 96 MiB of a 64 MiB budget.
        let bytes = pattern((7 * MIB) as usize, 5);
        let mut stalled = Vec::new();
        for i in 0..12 {
            stalled.push(stalled_put(&addr, i * 8 * MIB, 8 * MIB, &bytes).await);
        }
        // What each sent lands in the window: the streams put what they
        // hold once their clients go quiet.
        let cl = Client::connect(&addr).await.unwrap();
        let data = cl.window("data").unwrap();
        let tail = &bytes[bytes.len() - 64..];
        eventually(
            Duration::from_secs(60),
            "every stalled stream's bytes landed",
            || {
                let cl = &cl;
                async move {
                    for i in 0..12 {
                        let at = i * 8 * MIB + 7 * MIB - 64;
                        if cl.get(0, data, at, 64).await.unwrap()[..] != *tail {
                            return false;
                        }
                    }
                    true
                }
            },
        )
        .await;
        // A client that moves is served: a PutStream and a GetStream of 16
        // MiB each (the Rust client streams what exceeds the message limit).
        let moving = pattern((16 * MIB) as usize, 6);
        let at = 96 * MIB;
        tokio::time::timeout(Duration::from_secs(60), cl.put(0, data, at, &moving))
            .await
            .expect("the moving PutStream waited for budget the stalled ones hold")
            .unwrap();
        let back = tokio::time::timeout(Duration::from_secs(60), cl.get(0, data, at, 16 * MIB))
            .await
            .expect("the moving GetStream waited for budget the stalled ones hold")
            .unwrap();
        assert!(back[..] == moving[..], "the moving client's bytes");
        // The stalled streams hold nothing of the budget.
        eventually(Duration::from_secs(10), "the budget came back", || {
            let metrics = metrics.clone();
            async move {
                let body = common::scrape(&metrics).await;
                common::metric(&body, "pld_grpc_buffered_bytes{rank=\"0\"}") == 0.0
            }
        })
        .await;
        for (tx, call) in stalled {
            assert!(!call.is_finished(), "a stalled stream ended early");
            drop(tx);
            let e = call.await.unwrap().unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
            assert!(
                e.message().contains("carried 7340032 bytes"),
                "{}",
                e.message()
            );
        }
    });
}

// On the landed build nothing reaped a stalled PutStream: it stayed open
// as long as its client did.
#[test]
fn a_stalled_put_stream_is_cancelled_at_the_stall_timeout_with_a_status_that_says_so() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 1, &["--grpc-stall-timeout", "2s"]);
        let bytes = pattern(MIB as usize, 9);
        let t0 = Instant::now();
        let (_tx, call) = stalled_put(&c.grpc[0], 0, 8 * MIB, &bytes).await;
        let e = call.await.unwrap().unwrap_err();
        // At the stall timeout, not later than the test's own margin for a
        // loaded machine.
        assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
        assert_eq!(e.code(), tonic::Code::DeadlineExceeded, "{e:?}");
        assert!(
            e.message()
                .contains("sent nothing for 2s (--grpc-stall-timeout)")
                && e.message()
                    .contains("after 1048576 of 8388608 bytes, 1048576 of them written"),
            "{}",
            e.message()
        );
        let d = tonic_types::StatusExt::get_error_details(&e);
        let info = d.error_info().expect("an ErrorInfo");
        assert_eq!(info.reason, "STALLED");
        assert_eq!(
            info.metadata.get("applied").map(String::as_str),
            Some("1048576")
        );
        // What it sent was written.
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        assert!(cl.get(0, data, 0, MIB).await.unwrap()[..] == bytes[..]);
    });
}

/// `n` GetStreams of `len` bytes, each on a connection of its own, that
/// nobody reads: those that started, and how many wait for budget.
async fn stalled_gets(
    addr: &str,
    n: usize,
    len: u64,
) -> (
    Vec<tonic::Streaming<pld_proto::v1::GetStreamResponse>>,
    usize,
) {
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..n {
        let addr = addr.to_string();
        calls.spawn(async move {
            let mut g = PldClient::new(channel(&addr).await);
            let req = GetStreamRequest {
                rank: 0,
                window: "data".into(),
                offset: 0,
                len,
                region: None,
                chunking: None,
            };
            // (A stream still waiting when the test ends fails then.)
            g.get_stream(req).await.map(tonic::Response::into_inner)
        });
    }
    let mut started = Vec::new();
    // The streams that can start do so at once; give them a wide margin
    // on a loaded machine, then count.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while let Ok(Some(s)) = tokio::time::timeout_at(deadline, calls.join_next()).await {
        started.push(s.unwrap().unwrap());
    }
    let waiting = calls.len();
    calls.detach_all();
    (started, waiting)
}

// On the landed build's test, 200 stalled streams held ~150 MiB against a
// 256 MiB budget: the RSS bound held with no budget at all. Here the
// budget is the binding limit: without it the streams would hold 100 x
// 768 KiB = 75 MiB.
#[test]
fn stalled_get_streams_wait_for_the_budget_and_the_daemon_stays_within_it() {
    run(Duration::from_secs(180), async {
        let args = [
            "--window",
            "data=8MiB",
            "--window",
            "signal=64KiB",
            "--grpc-buffer-budget",
            "16MiB",
            "--grpc-stall-timeout",
            "1h",
        ];
        let (mut c, metrics) = common::metered(TransportKind::Tcp, 1, &args);
        let addr = c.grpc[0].clone();
        // The window written once, so that its pages count before, not
        // as the streams' growth.
        let cl = Client::connect(&addr).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(0, data, 0, &pattern((8 * MIB) as usize, 3))
            .await
            .unwrap();
        let rss0 = c.daemon(0).memory().unwrap();
        let (streams, waiting) = stalled_gets(&addr, 100, 8 * MIB).await;
        // Each started stream holds 256 KiB for gRPC's buffers from the
        // start and reads ahead 4 x 128 KiB: three quarters of 16 MiB (the
        // starting share) admit at most 48 of them.
        assert!(streams.len() <= 48, "{} streams started", streams.len());
        assert!(waiting >= 52, "{waiting} streams wait for the budget");
        let body = common::scrape(&metrics).await;
        // gRPC takes what the client's flow-control window admits, so the
        // started streams move and spend the rest of the budget too — and
        // no more.
        let held = common::metric(&body, "pld_grpc_buffered_bytes{rank=\"0\"}");
        assert!(held <= (16 * MIB) as f64, "{held} bytes held");
        assert!(held >= (12 * MIB) as f64, "the budget is spent: {held}");
        let grown = c.daemon(0).memory().unwrap().saturating_sub(rss0);
        assert!(
            grown < 40 * MIB,
            "RSS grew {} MiB with 100 stalled streams; the budget allows 16",
            grown >> 20
        );
        drop(streams);
    });
}

/// Rank `rank`'s daemon counters: (gets served, puts served).
async fn served(addr: &str) -> (u64, u64) {
    let mut raw = common::raw(addr).await;
    let s = raw
        .stats(pld_proto::v1::StatsRequest {})
        .await
        .unwrap()
        .into_inner();
    let get = |kind: &str| {
        s.counters
            .iter()
            .find(|c| c.name == "requests_served" && c.kind == kind)
            .map_or(0, |c| c.value)
    };
    (get("get"), get("put"))
}

// docs/client.md: a PutStream is put in blocks of 8 MiB with at most two in
// flight; past them it stops reading its client. With the target stopped,
// rank 0 holds the two blocks in flight and the one it gathered — and not
// the rest of the 64 MiB.
#[test]
fn a_put_stream_keeps_two_blocks_in_flight_and_then_stops_reading() {
    run(Duration::from_secs(180), async {
        // An op timeout longer than the test holds rank 1 stopped.
        let args = [
            "--window",
            "data=64MiB",
            "--window",
            "signal=64KiB",
            "--op-timeout",
            "120s",
        ];
        let (mut c, metrics) = common::metered(TransportKind::Tcp, 2, &args);
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        let bytes = pattern((64 * MIB) as usize, 21);
        c.daemon(1).pause();
        let put = {
            let (cl, bytes) = (cl.clone(), bytes.clone());
            tokio::spawn(async move { cl.put(1, data, 0, &bytes).await })
        };
        let buffered = || {
            let metrics = metrics.clone();
            async move {
                let body = common::scrape(&metrics).await;
                common::metric(&body, "pld_grpc_buffered_bytes{rank=\"0\"}")
            }
        };
        // Two blocks in flight and the next gathered: 24 MiB, no more.
        eventually(Duration::from_secs(60), "three blocks held", || {
            let b = buffered;
            async move { b().await >= (24 * MIB) as f64 }
        })
        .await;
        // Then it must stay there: read until the figure has not changed
        // for a second (a PutStream that read on would keep growing it).
        let mut held = buffered().await;
        let mut since = Instant::now();
        let settle_by = Instant::now() + Duration::from_secs(30);
        while since.elapsed() < Duration::from_secs(1) {
            assert!(
                Instant::now() < settle_by,
                "the bytes held never settled (last {held})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = buffered().await;
            if now != held {
                (held, since) = (now, Instant::now());
            }
        }
        assert!(
            held <= (24 * MIB) as f64,
            "{held} bytes held with rank 1 stopped"
        );
        assert!(!put.is_finished());
        c.daemon(1).resume();
        put.await.unwrap().unwrap();
        assert!(cl.get(1, data, 0, 64 * MIB).await.unwrap()[..] == bytes[..]);
    });
}

// docs/client.md: a GetStream reads a few messages ahead of what its
// client has taken, and a client that stops reading stops the daemon
// reading. Here the client takes nothing of 64 MiB: rank 1 serves what
// fills the read-ahead and gRPC's own windows (8 MiB a stream), not more.
#[test]
fn a_get_stream_whose_client_reads_nothing_stops_reading_the_window() {
    run(Duration::from_secs(120), async {
        let args = ["--window", "data=64MiB", "--window", "signal=64KiB"];
        let c = GrpcCluster::start(TransportKind::Tcp, 2, &args);
        let (gets0, _) = served(&c.grpc[1]).await;
        let mut g = PldClient::new(channel(&c.grpc[0]).await);
        let req = GetStreamRequest {
            rank: 1,
            window: "data".into(),
            offset: 0,
            len: 64 * MIB,
            region: None,
            chunking: None,
        };
        let mut s = g.get_stream(req).await.unwrap().into_inner();
        // Until rank 1's count of gets served settles (a second unchanged).
        let mut last = u64::MAX;
        loop {
            let (gets, _) = served(&c.grpc[1]).await;
            if gets == last {
                break;
            }
            last = gets;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // 128 KiB a get: at most 24 MiB read of 64 (the stream's 8 MiB
        // window, the sockets' buffers, the read-ahead).
        let read = (last - gets0) * 128 * 1024;
        assert!(
            read <= 24 * MIB,
            "{} MiB read for a client that took nothing",
            read >> 20
        );
        // Taking the stream makes the daemon read on, to the end.
        let mut got = 0u64;
        while let Some(m) = s.message().await.unwrap() {
            got += m.data.len() as u64;
        }
        assert_eq!(got, 64 * MIB);
    });
}
