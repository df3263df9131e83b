//! Barrier, signals and the reports of hangs, over real sockets. The
//! multi-process tests put every rank in its own process (`pld-test-rank`
//! embeds the rank engine as a user's program would); a `pld-daemon` cannot
//! enter a barrier of its own accord.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::MsgKind;
use pld_proto::barrier::rounds;
use pld_server::{Cmp, Error, NotifyOp, Rank, TransportKind};
use pld_tests::{Cluster, Daemon, both, loopback_peers, rank_config};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Runs `scenario` on `p` rank processes and checks that each prints `ok`;
/// returns their summary lines.
fn on_processes(t: TransportKind, p: u32, scenario: &[&str], within: Duration) -> Vec<String> {
    let peers = loopback_peers(p as usize);
    let procs: Vec<Daemon> = (0..p)
        .map(|r| Daemon::worker(r, &peers, t, scenario))
        .collect();
    let mut lines = Vec::new();
    for w in procs {
        let line = w.next_line(within).unwrap_or_default();
        let rank = w.rank;
        let (ok, stderr) = w.wait_exit(Duration::from_secs(10));
        assert!(
            ok && line.starts_with("ok"),
            "rank {rank} of {p} failed: {line}\n{stderr}"
        );
        lines.push(line);
    }
    lines
}

both!(
    a_thousand_back_to_back_barriers_at_4_ranks_in_4_processes,
    180,
    |t: TransportKind| async move {
        let lines = tokio::task::spawn_blocking(move || {
            on_processes(t, 4, &["barriers", "1000"], Duration::from_secs(150))
        })
        .await
        .unwrap();
        // Each rank sends one message per round: 1000 x 2 rounds.
        for l in &lines {
            assert!(l.contains("barriers=1000 barrier_msgs_sent=2000"), "{l}");
        }
    }
);

both!(
    store_mode_ring_reads_the_left_neighbours_value_after_every_barrier,
    600,
    |t: TransportKind| async move {
        for p in [2u32, 3, 4, 8] {
            let started = Instant::now();
            tokio::task::spawn_blocking(move || {
                on_processes(
                    t,
                    p,
                    &["ring-store", "1000", "200"],
                    Duration::from_secs(240),
                )
            })
            .await
            .unwrap();
            eprintln!("P = {p}: 1000 iterations in {:.1?}", started.elapsed());
        }
    }
);

async fn embedded(
    t: TransportKind,
    p: u32,
    tweak: impl Fn(&mut pld_server::Config),
) -> Vec<Arc<Rank>> {
    let peers = loopback_peers(p as usize);
    let mut set = tokio::task::JoinSet::new();
    for r in 0..p {
        let mut c = rank_config(r, &peers, t);
        tweak(&mut c);
        set.spawn(async move { (r, Rank::start(c).await.expect("rank starts")) });
    }
    let mut ranks: Vec<Option<Arc<Rank>>> = (0..p).map(|_| None).collect();
    while let Some(j) = set.join_next().await {
        let (r, rank) = j.unwrap();
        ranks[r as usize] = Some(Arc::new(rank));
    }
    ranks.into_iter().flatten().collect()
}

/// Every rank runs `n` barriers at once.
async fn barriers(ranks: &[Arc<Rank>], n: usize) {
    let tasks: Vec<_> = ranks
        .iter()
        .cloned()
        .map(|r| {
            tokio::spawn(async move {
                for _ in 0..n {
                    r.barrier().await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

both!(
    one_barrier_sends_p_times_ceil_log2_p_messages,
    120,
    |t: TransportKind| async move {
        for p in [2u32, 3, 5, 8] {
            let ranks = embedded(t, p, |_| {}).await;
            let count = |ranks: &[Arc<Rank>]| -> (u64, u64) {
                ranks.iter().fold((0, 0), |(s, r), rank| {
                    let st = rank.stats();
                    (
                        s + st.msgs_sent(MsgKind::Barrier),
                        r + st.msgs_received(MsgKind::Barrier),
                    )
                })
            };
            barriers(&ranks, 1).await;
            let want = p as u64 * rounds(p) as u64;
            assert_eq!(count(&ranks), (want, want), "P = {p}: one barrier");
            barriers(&ranks, 10).await;
            assert_eq!(
                count(&ranks),
                (11 * want, 11 * want),
                "P = {p}: eleven barriers"
            );
        }
    }
);

both!(
    a_rank_killed_during_a_barrier_is_named_by_the_survivors,
    120,
    |t: TransportKind| async move {
        let timeout = Duration::from_secs(3);
        let peers = loopback_peers(4);
        // Rank 3 is its own process; ranks 0-2 run here. All run barriers in a loop.
        let mut victim = Daemon::worker(
            3,
            &peers,
            t,
            &["--sync-timeout", "60s", "barriers", "1000000"],
        );
        let mut set = tokio::task::JoinSet::new();
        for r in 0..3 {
            let mut c = rank_config(r, &peers, t);
            c.sync_timeout = timeout;
            set.spawn(async move { Rank::start(c).await.expect("rank starts") });
        }
        let mut survivors = Vec::new();
        while let Some(j) = set.join_next().await {
            survivors.push(Arc::new(j.unwrap()));
        }
        let done = Arc::new(AtomicU64::new(0));
        let progress = Arc::new(tokio::sync::Notify::new());
        let loops: Vec<_> = survivors
            .iter()
            .cloned()
            .map(|r| {
                let (done, progress) = (done.clone(), progress.clone());
                tokio::spawn(async move {
                    loop {
                        if let Err(e) = r.barrier().await {
                            return (r.rank(), e, Instant::now());
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                        progress.notify_waiters();
                    }
                })
            })
            .collect();
        // Let the cluster run barriers, then kill rank 3 in the middle of them.
        loop {
            let more = progress.notified();
            if done.load(Ordering::Relaxed) >= 60 {
                break;
            }
            more.await;
        }
        victim.kill();
        let killed = Instant::now();
        for l in loops {
            let (rank, e, at) = l.await.unwrap();
            let took = at.duration_since(killed);
            // Bounded by the timeout and the probe, with room for a busy
            // machine: what matters is that it reports at all, not in 3 s.
            assert!(
                took < 3 * timeout + Duration::from_secs(5),
                "rank {rank} reported after {took:?}"
            );
            match &e {
                Error::BarrierTimeout {
                    unreachable,
                    report,
                    ..
                } => {
                    assert!(
                        unreachable.iter().any(|(r, _)| *r == 3),
                        "rank {rank}: {report}"
                    );
                    assert!(
                        report.contains("rank 3 is unreachable"),
                        "rank {rank}: {report}"
                    );
                }
                // A survivor that must signal rank 3 itself learns of the
                // loss at once and names it (the barrier fails on the send).
                Error::PeerLost { rank: 3, .. } => {}
                other => panic!("rank {rank}: expected a barrier timeout, got {other}"),
            }
        }
    }
);

both!(
    a_barrier_that_a_live_rank_never_enters_names_it_and_resumes,
    60,
    |t: TransportKind| async move {
        // Rank 3 is alive and answering, but not in this barrier yet.
        let c = Cluster::start(t, 4, &[]).await;
        let ranks: Vec<&Rank> = (0..3).map(|r| c.rank(r)).collect();
        let results = pld_tests::join_all(
            ranks
                .iter()
                .map(|r| r.barrier_within(Duration::from_millis(800))),
        )
        .await;
        for (r, res) in results.into_iter().enumerate() {
            match res {
                Err(Error::BarrierTimeout {
                    epoch,
                    not_heard_from,
                    unreachable,
                    report,
                    ..
                }) => {
                    assert_eq!(epoch, 1);
                    assert!(not_heard_from.contains(&3), "rank {r}: {report}");
                    assert!(unreachable.is_empty(), "rank 3 is alive: {report}");
                    assert!(report.contains("barrier epoch 1 on rank"), "{report}");
                    assert!(
                        report.contains("answer") && report.contains("did not enter this barrier"),
                        "{report}"
                    );
                }
                other => panic!("rank {r}: expected a barrier timeout, got {other:?}"),
            }
        }
        // The timed-out barrier stays pending: the next call resumes it
        // (epoch 1, with the signals already exchanged), and rank 3 joins it.
        let all: Vec<&Rank> = (0..4).map(|r| c.rank(r)).collect();
        let data = c.window("data");
        let results = pld_tests::join_all(all.iter().map(|r| async move {
            r.barrier_within(Duration::from_secs(20)).await?;
            // What each rank puts after it is ordered by the next barrier.
            r.put((r.rank() + 1) % 4, data, 0, &[r.rank() as u8 + 1])
                .await?;
            r.barrier_within(Duration::from_secs(20)).await?;
            r.get(r.rank(), data, 0, 1).await
        }))
        .await;
        for (r, res) in results.into_iter().enumerate() {
            let got = res.unwrap_or_else(|e| panic!("rank {r}: {e}"));
            assert_eq!(got[0] as usize, (r + 3) % 4 + 1, "rank {r}");
        }
    }
);

both!(
    wait_returns_once_notifies_meet_the_condition,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 3, &[2]).await;
        let signal = c.window("signal");
        let (r0, r1) = (c.rank(0), c.rank(1));
        let waiter = async {
            let v = r1.wait(signal, 8, Cmp::Ge, 3).await.unwrap();
            assert!(v >= 3);
            v
        };
        let notifier = async {
            for _ in 0..3 {
                r0.notify(1, signal, 8, 1, NotifyOp::AtomicAdd)
                    .await
                    .unwrap();
            }
        };
        let (v, ()) = tokio::join!(waiter, notifier);
        assert_eq!(v, 3);
        // Every comparison, negative values included.
        r0.notify(1, signal, 12, -5, NotifyOp::Set).await.unwrap();
        for (cmp, expected, holds) in [
            (Cmp::Eq, -5, true),
            (Cmp::Ne, -5, false),
            (Cmp::Gt, -6, true),
            (Cmp::Ge, -5, true),
            (Cmp::Lt, -5, false),
            (Cmp::Le, -4, true),
        ] {
            assert_eq!(
                r1.test(signal, 12, cmp, expected).unwrap(),
                holds,
                "-5 {cmp} {expected}"
            );
            if holds {
                assert_eq!(r1.wait(signal, 12, cmp, expected).await.unwrap(), -5);
            }
        }
        // Every comparison also through the blocking path: each wait starts
        // unsatisfied (the cell holds 0) and is satisfied by a notify.
        for (i, (cmp, expected, set)) in [
            (Cmp::Ne, 0, 9),
            (Cmp::Lt, 0, -3),
            (Cmp::Le, -1, -1),
            (Cmp::Gt, 5, 6),
            (Cmp::Ge, 5, 5),
            (Cmp::Eq, -7, -7),
        ]
        .into_iter()
        .enumerate()
        {
            let cell = 32 + 4 * i as u64;
            assert!(!r1.test(signal, cell, cmp, expected).unwrap());
            let (v, ()) = tokio::join!(r1.wait(signal, cell, cmp, expected), async {
                r0.notify(1, signal, cell, set, NotifyOp::Set)
                    .await
                    .unwrap();
            });
            assert_eq!(v.unwrap(), set, "{cmp} {expected}");
        }
        // A wait on the own cell wakes on the own rank's notify too.
        let (v, ()) = tokio::join!(r1.wait(signal, 16, Cmp::Eq, 7), async {
            r1.notify(1, signal, 16, 7, NotifyOp::Set).await.unwrap();
        });
        assert_eq!(v.unwrap(), 7);
    }
);

both!(
    a_wait_that_cannot_finish_names_cell_expected_and_last_value,
    60,
    |t: TransportKind| async move {
        let c = Cluster::start(t, 2, &[1]).await;
        let signal = c.window("signal");
        let r = c.rank(0);
        r.notify(0, signal, 8, 2, NotifyOp::Set).await.unwrap();
        let started = Instant::now();
        let e = r
            .wait_within(signal, 8, Cmp::Eq, 5, Duration::from_millis(300))
            .await
            .unwrap_err();
        // Its own deadline, not the rank's (the sync timeout, 60 s): the
        // margin is for a loaded machine.
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
        match &e {
            Error::WaitTimeout {
                window,
                offset,
                expected,
                last,
                ..
            } => {
                assert_eq!(
                    (window.as_str(), *offset, *expected, *last),
                    ("signal", 8, 5, 2)
                );
            }
            other => panic!("expected a wait timeout, got {other}"),
        }
        let text = e.to_string();
        assert!(
            text.contains("signal cell 8 of window 'signal' to be == 5"),
            "{text}"
        );
        assert!(text.contains("last value seen 2"), "{text}");
        // A bad comparison or cell is refused before waiting, naming it.
        match r.wait(signal, 9, Cmp::Eq, 1).await {
            Err(Error::CellAccess {
                op: "wait",
                error: pld_server::AccessError::MisalignedOffset { offset: 9, .. },
                ..
            }) => {}
            other => panic!("expected the misaligned cell refused, got {other:?}"),
        }
        match r.test(signal, 0, Cmp::Unspecified, 1) {
            Err(Error::CellAccess {
                op: "test",
                error: pld_server::AccessError::InvalidCmp { value: 0 },
                ..
            }) => {}
            other => panic!("expected the comparison refused, got {other:?}"),
        }
    }
);

/// Rank 0, with rank 1 a fake that accepts requests and never answers;
/// hold the second value for as long as the fake should stay.
async fn rank_beside_a_silent_fake() -> (Rank, impl Sized) {
    let peers = loopback_peers(2);
    let listener = tokio::net::TcpListener::bind(&peers[1]).await.unwrap();
    let mut conns = pld_tests::raw::fake_rank(listener, 1, 2).await;
    let mut c = rank_config(0, &peers, TransportKind::Tcp);
    c.op_timeout = Duration::from_secs(30);
    // The fake speaks plain TCP.
    c.security = pld_server::Security::Insecure;
    let r = Rank::start(c).await.unwrap();
    let held = conns.recv().await;
    (r, (conns, held))
}

#[test]
fn a_quiet_that_cannot_finish_lists_the_outstanding_ops_per_peer() {
    pld_tests::run(Duration::from_secs(60), async {
        let (r, _fake) = rank_beside_a_silent_fake().await;
        let data = r.window("data").unwrap();
        for _ in 0..3 {
            drop(r.put_nb(1, data, 0, b"never acked").await.unwrap());
        }
        let e = r
            .quiet_within(Duration::from_millis(300))
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("rank 1: 3 ops (put #1 for"), "{text}");
        assert!(text.contains("put #3"), "{text}");
        assert!(
            text.contains("rank 1 is unreachable (no answer to a probe"),
            "{text}"
        );
    });
}

/// `quiet` looks only at links sent something since a quiet last found
/// them idle (`peer::touched`): one that found every link idle must still
/// wait for the next put, and one that timed out must leave the link to be
/// looked at again.
#[test]
fn a_quiet_after_an_idle_quiet_still_waits_for_the_next_put() {
    pld_tests::run(Duration::from_secs(60), async {
        let (r, _fake) = rank_beside_a_silent_fake().await;
        let data = r.window("data").unwrap();
        // Nothing issued: the quiet finds every link idle and clears them.
        r.quiet_within(Duration::from_millis(300)).await.unwrap();
        r.put_nbi(1, data, 0, b"never acked").await.unwrap();
        let e = r
            .quiet_within(Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("rank 1: 1 op (put #1"), "{e}");
        // The put is still outstanding (with the probe the report sent):
        // the next quiet waits for it again.
        let e = r
            .quiet_within(Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("put #1 for"), "{e}");
    });
}

// docs/semantics.md, "Signals": a wait that times out names the ranks that
// are unreachable — the ones that could have notified it.
#[test]
fn a_wait_that_times_out_names_the_unreachable_ranks() {
    pld_tests::run(Duration::from_secs(60), async {
        let (r, _fake) = rank_beside_a_silent_fake().await;
        let signal = r.window("signal").unwrap();
        let e = r
            .wait_within(signal, 0, Cmp::Eq, 1, Duration::from_millis(300))
            .await
            .unwrap_err();
        match &e {
            Error::WaitTimeout { unreachable, .. } => {
                assert_eq!(unreachable.len(), 1, "{e}");
                assert_eq!(unreachable[0].0, 1, "{e}");
            }
            other => panic!("expected a wait timeout, got {other}"),
        }
        assert!(e.to_string().contains("rank 1 is unreachable"), "{e}");
    });
}
