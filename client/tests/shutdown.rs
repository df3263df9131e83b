//! Graceful shutdown: a daemon that gets SIGTERM while it serves traffic
//! says NOT_SERVING, lets quick calls finish, fails the calls that cannot
//! (a wait nobody will satisfy, a stalled PutStream) with UNAVAILABLE
//! naming the shutdown, leaves no acknowledged put unapplied, exits 0
//! within a bound, and its peers log its departure. Every other test kills
//! with SIGKILL.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use pld_client::{Client, Cmp};
use pld_proto::v1::{PutStreamHeader, PutStreamRequest, WaitRequest};
use pld_server::TransportKind;
use pld_tests::{Daemon, GrpcCluster, both, daemon_bin};
use std::time::{Duration, Instant};
use tokio_stream::wrappers::ReceiverStream;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
use tonic_types::StatusExt;

/// A status that says the daemon is shutting down.
fn assert_shutdown(s: &tonic::Status, what: &str) {
    assert_eq!(s.code(), tonic::Code::Unavailable, "{what}: {s:?}");
    let reason = s.get_error_details().error_info().map(|i| i.reason.clone());
    assert_eq!(reason.as_deref(), Some("SHUTTING_DOWN"), "{what}: {s:?}");
    assert!(
        s.message().contains("rank 0 is shutting down"),
        "{what}: {}",
        s.message()
    );
}

both!(
    sigterm_drains_the_client_plane_and_leaves_in_order,
    120,
    |t: TransportKind| async move {
        let mut c = GrpcCluster::plan(t, 2, &pld_tests::SMALL_WINDOWS);
        c.spawn(0);
        // Rank 1 logs at info: where it says that rank 0 left.
        let mut args: Vec<&str> = vec!["--grpc", &c.grpc[1]];
        args.extend(c.args.iter().map(String::as_str));
        let mut cmd = std::process::Command::new(daemon_bin());
        cmd.args(Daemon::args(1, &c.peers, t, &args))
            .env("RUST_LOG", "info");
        c.daemons[1] = Some(Daemon::start(1, cmd));
        for r in 0..2 {
            c.daemon(r).wait_ready(Duration::from_secs(30));
        }
        let addr = c.grpc[0].clone();
        let cl = Client::connect(&addr).await.unwrap();
        let data = cl.window("data").unwrap();

        // Watching health: SERVING now.
        let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut health = HealthClient::new(channel)
            .watch(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let first = health.message().await.unwrap().unwrap();
        assert_eq!(first.status, ServingStatus::Serving as i32);

        // A wait nobody will satisfy, and a PutStream that stalls half-way.
        let mut raw = common::raw(&addr).await;
        let wait = tokio::spawn(async move {
            let req = WaitRequest {
                window: "signal".into(),
                offset: 0,
                cmp: Cmp::Eq as i32,
                value: 7,
                timeout_ms: 60_000,
            };
            raw.wait(req).await
        });
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let header = PutStreamHeader {
            rank: 1,
            window: "data".into(),
            offset: 0,
            len: 512 << 10,
            ..Default::default()
        };
        tx.send(PutStreamRequest {
            header: Some(header),
            data: vec![1u8; 4096].into(),
        })
        .await
        .unwrap();
        let mut raw = common::raw(&addr).await;
        let stream = tokio::spawn(async move { raw.put_stream(ReceiverStream::new(rx)).await });
        // Traffic: puts to rank 1, each to its own 8 bytes, until they fail.
        let traffic = {
            let cl = cl.clone();
            tokio::spawn(async move {
                let mut done = Vec::new();
                for i in 1..100_000u64 {
                    let at = 4096 + 8 * i;
                    match cl.put(1, data, at, &i.to_le_bytes()).await {
                        Ok(()) => done.push((at, i)),
                        Err(e) => return (done, Some(e)),
                    }
                }
                (done, None)
            })
        };
        // Let the traffic run, then SIGTERM.
        while cl.get(1, data, 4096 + 8, 8).await.unwrap()[..] == [0u8; 8] {}
        let t0 = Instant::now();
        c.daemon(0).terminate();

        // Health says NOT_SERVING before the plane closes.
        let next = tokio::time::timeout(Duration::from_secs(20), health.message())
            .await
            .expect("health did not turn NOT_SERVING within 20 s of SIGTERM")
            .unwrap()
            .expect("a health update");
        assert_eq!(next.status, ServingStatus::NotServing as i32);
        // The calls that cannot finish end with the reason, after the grace.
        assert_shutdown(&wait.await.unwrap().unwrap_err(), "the wait");
        let waited = t0.elapsed();
        assert!(waited >= pld_daemon::grpc::DRAIN_GRACE, "{waited:?}");
        assert_shutdown(&stream.await.unwrap().unwrap_err(), "the stalled PutStream");
        drop(tx);
        // The traffic stops with an error that says the daemon is gone or
        // going (a call may also meet the closed connection).
        let (done, e) = traffic.await.unwrap();
        let e = e.expect("the traffic stopped");
        assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
        assert_eq!(e.reason(), Some("SHUTTING_DOWN"), "{e}");
        assert!(!done.is_empty());

        // The process exits, successfully, within a bound: the grace, the
        // connections' close, the peer links' close (each bounded).
        let d = c.daemons[0].take().unwrap();
        let (ok, log) = d.wait_exit(Duration::from_secs(20));
        assert!(ok, "exit status of a SIGTERM'd daemon:\n{log}");
        assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
        assert!(
            log.contains("pld-daemon: rank 0 got SIGTERM: shutting down"),
            "{log}"
        );
        assert!(log.contains("pld-daemon: rank 0 stopped after"), "{log}");

        // Every put that was acknowledged is in rank 1's window.
        let c1 = Client::connect(&c.grpc[1]).await.unwrap();
        let window = c1.get(1, data, 0, 1 << 20).await.unwrap();
        for (at, i) in &done {
            let at = *at as usize;
            assert_eq!(
                window[at..at + 8],
                i.to_le_bytes(),
                "put {i} was acknowledged"
            );
        }
        // Rank 1 logged the departure: over QUIC as an orderly close (rank
        // 0 closed its connection saying why), over TCP as the connection
        // closed by the peer (as a killed rank's would be).
        let departure = match t {
            TransportKind::Quic => "link to rank 0 closed",
            TransportKind::Tcp => "rank 0 is unreachable: connection closed by the peer",
        };
        assert!(
            c.daemon(1).wait_log(departure, Duration::from_secs(10)),
            "{}",
            c.daemon(1).log_so_far()
        );
    }
);

both!(
    shutdown_delivers_every_put_nbi_queued_before_it,
    60,
    |t: TransportKind| async move {
        // Rank 0 embedded here, rank 1 a daemon whose gRPC port reads back.
        let peers = pld_tests::loopback_peers(2);
        let grpc = pld_tests::loopback_peers(1).remove(0);
        let mut d = Daemon::spawn(1, &peers, t, &["--grpc", &grpc, "--window", "data=32MiB"]);
        let mut cfg = pld_tests::rank_config(0, &peers, t);
        cfg.windows = vec!["data=32MiB".parse().unwrap()];
        let rank = pld_server::Rank::start(cfg).await.unwrap();
        d.wait_ready(Duration::from_secs(30));
        let data = rank.window("data").unwrap();
        // Non-blocking puts, queued on the link and not waited for — 24
        // MiB, more than the sockets take at once, so most is still queued
        // when shutdown begins: what the rank sent before it leaves must
        // reach its peer (shutdown finishes the link's stream), with no
        // quiet between.
        const CHUNK: usize = 64 << 10;
        const N: usize = 384;
        let chunk = |i: usize| vec![(i % 251) as u8 + 1; CHUNK];
        for i in 0..N {
            rank.put_nbi(1, data, (i * CHUNK) as u64, &chunk(i))
                .await
                .unwrap();
        }
        rank.shutdown().await;
        drop(rank);
        let cl = Client::connect(&grpc).await.unwrap();
        let w = cl.window("data").unwrap();
        let got = cl.get(1, w, 0, (N * CHUNK) as u64).await.unwrap();
        let missing: Vec<usize> = (0..N)
            .filter(|i| got[i * CHUNK..(i + 1) * CHUNK] != chunk(*i)[..])
            .collect();
        assert!(
            missing.is_empty(),
            "{} of {N} puts sent before shutdown never arrived whole (first: {:?})",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
    }
);
