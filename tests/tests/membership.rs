//! Forming a cluster, refusing strangers, and losing a rank.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_server::{Error, Rank, TransportKind};
use pld_tests::{Cluster, Daemon, both, loopback_peers, pattern, rank_config};
use std::time::{Duration, Instant};

both!(
    ranks_started_in_reverse_order_form_the_cluster,
    120,
    |t: TransportKind| async move {
        let peers = loopback_peers(4);
        // Ranks 3, 2, 1 start first, each before the ones it must reach exist.
        let mut daemons: Vec<Daemon> = (1..4)
            .rev()
            .map(|r| Daemon::spawn(r, &peers, t, &[]))
            .collect();
        let rank0 = Rank::start(rank_config(0, &peers, t))
            .await
            .expect("rank 0 joins last");
        for d in &mut daemons {
            d.wait_ready(Duration::from_secs(30));
        }
        let data = rank0.window("data").unwrap();
        for peer in 1..4 {
            let bytes = pattern(1000, peer as u64);
            rank0.put(peer, data, 0, &bytes).await.unwrap();
            assert_eq!(
                &rank0.get(peer, data, 0, 1000).await.unwrap()[..],
                &bytes[..]
            );
        }
    }
);

both!(
    a_rank_of_another_cluster_is_refused_by_name,
    60,
    |t: TransportKind| async move {
        let peers = loopback_peers(2);
        let short = ["--connect-timeout", "20s"];
        let a = Daemon::spawn(
            0,
            &peers,
            t,
            &[&short[..], &["--cluster-id", "alpha"]].concat(),
        );
        let b = Daemon::spawn(
            1,
            &peers,
            t,
            &[&short[..], &["--cluster-id", "beta"]].concat(),
        );
        let (ok_a, err_a) = a.wait_exit(Duration::from_secs(30));
        let (ok_b, err_b) = b.wait_exit(Duration::from_secs(30));
        assert!(!ok_a && !ok_b, "both ranks refuse to serve");
        let why = "cluster id mismatch: rank 0 is in cluster 'alpha', rank 1 in cluster 'beta'";
        assert!(
            err_a.contains(&format!("rank 1 at {}", peers[1])),
            "rank 0 names its peer: {err_a}"
        );
        assert!(
            err_b.contains(&format!("rank 0 at {}", peers[0])),
            "rank 1 names its peer: {err_b}"
        );
        // Each side states the mismatch from where it stands.
        assert!(err_a.contains(why), "{err_a}");
        assert!(
            err_b.contains(
                "cluster id mismatch: rank 1 is in cluster 'beta', rank 0 in cluster 'alpha'"
            ),
            "{err_b}"
        );
    }
);

both!(
    a_rank_with_another_window_size_is_refused_by_name,
    60,
    |t: TransportKind| async move {
        let peers = loopback_peers(2);
        let daemon = Daemon::spawn(
            1,
            &peers,
            t,
            &["--window", "data=8MiB", "--window", "signal=64KiB"],
        );
        let err = Rank::start(rank_config(0, &peers, t))
            .await
            .expect_err("rank 0 must refuse");
        match &err {
            Error::Mismatch {
                peer: 1, mismatch, ..
            } => assert_eq!(
                mismatch.to_string(),
                "window 'data' size mismatch: 16777216 bytes on rank 0, 8388608 bytes on rank 1"
            ),
            other => panic!("expected a window mismatch, got {other}"),
        }
        let (ok, stderr) = daemon.wait_exit(Duration::from_secs(40));
        assert!(!ok);
        assert!(stderr.contains("window 'data' size mismatch"), "{stderr}");
        assert!(
            stderr.contains(&format!("rank 0 at {}", peers[0])),
            "{stderr}"
        );
    }
);

both!(
    a_dead_rank_fails_ops_to_it_in_time_and_the_others_go_on,
    60,
    |t: TransportKind| async move {
        let op_timeout = Duration::from_secs(2);
        let mut c = Cluster::start_with(t, 3, &[2], |cfg| cfg.op_timeout = op_timeout).await;
        let data = c.window("data");
        c.rank(0).put(2, data, 0, b"before").await.unwrap();
        // Rank 2 stops answering, three puts without a handle go out to
        // it, and then it dies: they are outstanding when it does.
        c.daemon(2).pause();
        for i in 0..3 {
            c.rank(0).put_nbi(2, data, 8 * i, b"lost").await.unwrap();
        }
        c.daemon(2).kill();

        let started = Instant::now();
        let err = c
            .rank(0)
            .put(2, data, 0, b"after")
            .await
            .expect_err("rank 2 is dead");
        let took = started.elapsed();
        // The op timeout (checked every tenth of it) bounds it; the slack is
        // for a busy machine, far below the minutes an unbounded op takes.
        assert!(
            took < 3 * op_timeout + Duration::from_secs(5),
            "the op failed after {took:?}, op timeout {op_timeout:?}"
        );
        // Over TCP the dead rank's connection is reset at once: PeerLost.
        // Over QUIC a dead peer sends nothing (docs/semantics.md): the op
        // timeout or the connection's idle timeout, whichever comes first.
        match t {
            TransportKind::Tcp => assert!(matches!(err, Error::PeerLost { rank: 2, .. }), "{err}"),
            TransportKind::Quic => assert!(
                matches!(
                    err,
                    Error::PeerLost { rank: 2, .. } | Error::OpTimeout { rank: 2, .. }
                ),
                "{err}"
            ),
        }
        assert!(err.to_string().contains("rank 2"), "{err}");

        // Between the survivors everything still works, both ways.
        for (a, b) in [(0, 1), (1, 0)] {
            let bytes = pattern(100_000, a as u64);
            c.rank(a).put(b, data, 0, &bytes).await.unwrap();
            let landed = c.rank(b).local(data).unwrap().read(0, 100_000).unwrap();
            assert_eq!(landed, bytes, "rank {a}'s put is in rank {b}'s window");
        }
        // quiet does not hang on the dead rank: the three puts that were
        // outstanding have failed, and it says so, once.
        let started = Instant::now();
        match c.rank(0).quiet().await {
            Err(Error::ImplicitFailed { failed: 3, first }) => {
                assert!(first.to_string().contains("rank 2"), "{first}");
                if t == TransportKind::Tcp {
                    assert!(matches!(*first, Error::PeerLost { rank: 2, .. }), "{first}");
                }
            }
            other => panic!("expected the three lost puts, got {other:?}"),
        }
        assert!(started.elapsed() < 3 * op_timeout + Duration::from_secs(5));
        c.rank(0).quiet().await.unwrap();
        // And the next op to the dead rank fails at once or within the
        // timeout, naming it: the link is lost (or, over QUIC, nothing
        // answers).
        let started = Instant::now();
        match c.rank(1).get(2, data, 0, 8).await {
            Err(Error::PeerLost { rank: 2, .. }) => {}
            Err(Error::OpTimeout { rank: 2, .. }) if t == TransportKind::Quic => {}
            other => panic!("a get from the dead rank 2: {other:?}"),
        }
        assert!(started.elapsed() < 3 * op_timeout + Duration::from_secs(5));
    }
);

both!(
    ranks_that_disagree_on_checked_mode_are_refused_by_name,
    60,
    |t: TransportKind| async move {
        let peers = loopback_peers(2);
        let short = ["--connect-timeout", "20s"];
        let a = Daemon::spawn(0, &peers, t, &[&short[..], &["--checked"]].concat());
        let b = Daemon::spawn(1, &peers, t, &short);
        let (ok_a, err_a) = a.wait_exit(Duration::from_secs(30));
        let (ok_b, err_b) = b.wait_exit(Duration::from_secs(30));
        assert!(!ok_a && !ok_b, "both ranks refuse to serve");
        assert!(
            err_a.contains("checked mode mismatch: rank 0 runs with --checked, rank 1 without it"),
            "{err_a}"
        );
        assert!(
            err_b.contains("checked mode mismatch: rank 1 runs without it, rank 0 with --checked"),
            "{err_b}"
        );
    }
);
