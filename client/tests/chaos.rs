//! Chaos with real daemon processes: a rank killed and restarted, a rank
//! cut off by a network partition. The survivors report the loss, naming
//! the rank, within their deadlines; a restarted rank rejoins.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_client::{Client, Code};
use pld_server::TransportKind;
use pld_tests::{GrpcCluster, both, pattern};
use std::time::Duration;

/// The epoch in a ready line (`... (quic, epoch E)`).
fn epoch_of(ready: &str) -> u64 {
    ready
        .rsplit("epoch ")
        .next()
        .and_then(|s| s.trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("no epoch in {ready:?}"))
}

/// An error that names `rank` and says it is gone or late.
fn names_loss(e: &pld_client::Error, rank: u32) {
    assert!(
        matches!(e.code(), Code::Unavailable | Code::DeadlineExceeded)
            && e.to_string().contains(&format!("rank {rank}")),
        "{e}"
    );
}

/// An op's error after `rank` died: over TCP its connection was reset at
/// once, so the op fails with PEER_LOST; a dead QUIC peer sends nothing,
/// and the op timeout may come first (docs/semantics.md).
fn op_names_loss(t: TransportKind, e: &pld_client::Error, rank: u32) {
    names_loss(e, rank);
    if t == TransportKind::Tcp {
        assert_eq!(e.reason(), Some("PEER_LOST"), "{e}");
    }
}

async fn barrier_all(clients: &[&Client], within: Duration) -> Vec<pld_client::Result<()>> {
    pld_tests::join_all(clients.iter().map(|c| c.barrier_within(within))).await
}

both!(
    a_killed_rank_is_reported_then_rejoins_with_a_new_epoch_and_the_cluster_works_again,
    180,
    |t: TransportKind| async move {
        let args = [
            &pld_tests::SMALL_WINDOWS[..],
            &["--op-timeout", "2s", "--sync-timeout", "20s"],
        ]
        .concat();
        let mut c = GrpcCluster::plan(t, 3, &args);
        let mut first = Vec::new();
        for r in 0..3 {
            c.spawn(r);
        }
        for r in 0..3 {
            first.push(epoch_of(&c.daemon(r).wait_ready(Duration::from_secs(30))));
        }
        let c0 = Client::connect(&c.grpc[0]).await.unwrap();
        let c1 = Client::connect(&c.grpc[1]).await.unwrap();
        let c2 = Client::connect(&c.grpc[2]).await.unwrap();
        let data = c0.window("data").unwrap();
        for r in barrier_all(&[&c0, &c1, &c2], Duration::from_secs(10)).await {
            r.unwrap();
        }
        c0.put(1, data, 0, b"before").await.unwrap();

        // Rank 1 dies without a word.
        c.daemon(1).kill();
        drop(c1);
        // The survivors report it by name: an op to it, and a barrier.
        op_names_loss(t, &c0.put(1, data, 0, b"lost").await.unwrap_err(), 1);
        for r in barrier_all(&[&c0, &c2], Duration::from_secs(3)).await {
            names_loss(&r.unwrap_err(), 1);
        }
        // Ops among the survivors go on.
        c2.put(0, data, 64, b"still here").await.unwrap();
        assert_eq!(&c0.get(0, data, 64, 10).await.unwrap()[..], b"still here");

        // Rank 1 comes back as a new run.
        c.spawn(1);
        let second = epoch_of(&c.daemon(1).wait_ready(Duration::from_secs(30)));
        assert!(second > first[1], "a new epoch: {} then {second}", first[1]);
        let c1 = Client::connect(&c.grpc[1]).await.unwrap();
        // Its windows start zeroed: what the old run held is gone.
        assert_eq!(&c0.get(1, data, 0, 6).await.unwrap()[..], &[0u8; 6]);

        // The cluster works again: the barrier the survivors left pending
        // completes with the new rank 1, ops reach it from everyone.
        for r in barrier_all(&[&c0, &c1, &c2], Duration::from_secs(10)).await {
            r.unwrap();
        }
        let bytes = pattern(300_000, 9);
        c0.put(1, data, 0, &bytes).await.unwrap();
        assert_eq!(
            &c2.get(1, data, 0, bytes.len() as u64).await.unwrap()[..],
            &bytes[..]
        );
        c1.put(2, data, 0, b"from the new rank 1").await.unwrap();
        assert_eq!(
            &c0.get(2, data, 0, 19).await.unwrap()[..],
            b"from the new rank 1"
        );
        assert_eq!(
            c2.fetch_add(1, data, 512 << 10, pld_client::Dtype::Int64, 5)
                .await
                .unwrap(),
            0
        );
        for _ in 0..3 {
            for r in barrier_all(&[&c0, &c1, &c2], Duration::from_secs(10)).await {
                r.unwrap();
            }
        }

        // The survivors logged the restart and the rejoin with both epochs.
        for r in [0, 2] {
            let log = c.daemons[r].take().expect("survivor").kill_and_stderr();
            assert!(
                log.contains(&format!(
                    "rank 1 restarted (epoch {} -> {second})",
                    first[1]
                )),
                "{log}"
            );
            assert!(
                log.contains(&format!("rank 1 rejoined with epoch {second}")),
                "{log}"
            );
        }
    }
);
