use super::harness::{Network, Rng};
use super::*;
use std::collections::HashSet;

fn finished_every_epoch_once(net: &Network, epochs: u64) {
    for (r, done) in net.completed.iter().enumerate() {
        assert_eq!(
            done,
            &(1..=epochs).collect::<Vec<_>>(),
            "rank {r} must complete each epoch exactly once, in order"
        );
    }
}

#[test]
fn rounds_are_ceil_log2_p() {
    let want = [
        (1, 0),
        (2, 1),
        (3, 2),
        (4, 2),
        (5, 3),
        (8, 3),
        (9, 4),
        (16, 4),
        (64, 6),
        (65, 7),
    ];
    for (p, r) in want {
        assert_eq!(rounds(p), r, "P = {p}");
    }
}

#[test]
fn round_k_signals_r_plus_2k_and_waits_for_r_minus_2k() {
    let b = Barrier::new(1, 5);
    assert_eq!((b.signals(0), b.signals(1), b.signals(2)), (2, 3, 0));
    assert_eq!(
        (b.signalled_by(0), b.signalled_by(1), b.signalled_by(2)),
        (0, 4, 2)
    );
}

#[test]
fn a_single_rank_passes_at_once() {
    let mut b = Barrier::new(0, 1);
    let mut out = Vec::new();
    assert_eq!(b.enter(Instant::now()), 1);
    assert_eq!(b.progress(&mut out), Progress::Done { epoch: 1 });
    assert!(out.is_empty());
    assert_eq!(b.enter(Instant::now()), 2);
}

#[test]
fn random_runs_of_4_epochs_up_to_8_ranks_complete_each_epoch_once_and_safely() {
    for p in 1..=8u32 {
        for seed in 0..300u64 {
            let epochs = 4;
            let mut net = Network::new(p, epochs);
            net.run_random(&mut Rng::new(seed * 131 + p as u64), 0);
            finished_every_epoch_once(&net, epochs);
            let total: u64 = net.sent.iter().sum();
            assert_eq!(
                total,
                epochs * p as u64 * rounds(p) as u64,
                "P = {p}, seed {seed}: each barrier sends P * ceil(log2 P) messages"
            );
            assert!(net.in_flight.is_empty());
        }
    }
}

/// Every interleaving, explored depth first with states already seen
/// skipped, for small clusters.
fn explore_all(p: u32, epochs: u64) -> (usize, usize) {
    let mut seen = HashSet::new();
    let mut stack = vec![Network::new(p, epochs)];
    let mut finals = 0;
    while let Some(net) = stack.pop() {
        if !seen.insert(net.key()) {
            continue;
        }
        let events = net.events();
        if events.is_empty() {
            finished_every_epoch_once(&net, epochs);
            finals += 1;
            continue;
        }
        for e in events {
            let mut next = net.clone();
            next.step(e, false);
            stack.push(next);
        }
    }
    (seen.len(), finals)
}

#[test]
fn every_interleaving_up_to_8_ranks_completes_each_epoch_once_and_safely() {
    for (p, epochs) in [(2, 4), (3, 3), (4, 2), (5, 2), (6, 1), (8, 1)] {
        let (states, finals) = explore_all(p, epochs);
        eprintln!("P = {p}, {epochs} epochs: {states} states, {finals} final");
        assert!(states > 10 && finals >= 1);
    }
}

#[test]
fn a_message_of_the_next_epoch_is_kept_until_this_rank_gets_there() {
    // Rank 1 of 2 finishes epoch 1 and signals epoch 2 before rank 0 has
    // even seen epoch 1's message.
    let t = Instant::now();
    let (mut a, mut b) = (Barrier::new(0, 2), Barrier::new(1, 2));
    let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
    a.enter(t);
    b.enter(t);
    a.progress(&mut out_a);
    b.progress(&mut out_b);
    b.on_message(0, 1, 0).unwrap();
    assert_eq!(b.progress(&mut out_b), Progress::Done { epoch: 1 });
    b.enter(t);
    b.progress(&mut out_b);
    assert_eq!(out_b.len(), 2, "rank 1 signalled epochs 1 and 2");
    // Epoch 2's message reaches rank 0 first.
    a.on_message(1, 2, 0).unwrap();
    a.on_message(1, 1, 0).unwrap();
    assert_eq!(a.progress(&mut out_a), Progress::Done { epoch: 1 });
    a.enter(t);
    assert_eq!(
        a.progress(&mut out_a),
        Progress::Done { epoch: 2 },
        "the kept message finishes epoch 2"
    );
}

#[test]
fn impossible_messages_are_refused_without_changing_state() {
    let mut b = Barrier::new(0, 4);
    let t = Instant::now();
    b.enter(t);
    let before = b.clone();
    assert!(matches!(
        b.on_message(3, 1, 2),
        Err(BarrierError::NoSuchRound { .. })
    ));
    assert!(matches!(
        b.on_message(1, 1, 0),
        Err(BarrierError::WrongSender { expected: 3, .. })
    ));
    assert!(matches!(
        b.on_message(3, 9, 0),
        Err(BarrierError::TooFarAhead { .. })
    ));
    assert_eq!(b, before);
    b.on_message(3, 1, 0).unwrap();
    assert!(matches!(
        b.on_message(3, 1, 0),
        Err(BarrierError::Duplicate { .. })
    ));
    let mut out = Vec::new();
    b.progress(&mut out);
    assert!(
        matches!(b.on_message(3, 1, 0), Err(BarrierError::Duplicate { .. })),
        "consumed"
    );
}

#[test]
fn a_cut_link_yields_the_diagnostic_naming_epoch_round_and_ranks() {
    for p in 2..=8u32 {
        for seed in 0..50u64 {
            let mut rng = Rng::new(seed);
            let from = rng.below(p as usize) as u32;
            let to = (from + 1) % p;
            let mut net = Network::new(p, 3);
            net.cut.insert((from, to));
            net.run_random(&mut rng, 0);
            // No hang: the run ended; whoever is stuck can say why.
            let mut stuck = 0;
            for r in 0..p as usize {
                if !net.inside[r] {
                    continue;
                }
                stuck += 1;
                let mut out = Vec::new();
                let Progress::Waiting(m) = net.ranks[r].progress(&mut out) else {
                    panic!("rank {r} is inside a barrier, so it waits");
                };
                assert_eq!(m.waiting_for, net.ranks[r].signalled_by(m.round));
                assert!(m.not_heard_from.contains(&m.waiting_for));
                let text = m.to_string();
                assert!(
                    text.contains(&format!("barrier epoch {}", m.epoch)),
                    "{text}"
                );
                assert!(
                    text.contains(&format!("round {} of {}", m.round + 1, rounds(p))),
                    "{text}"
                );
            }
            // Rank `to` waits on the cut link in round 0 of epoch 1 (it is
            // signalled by `from` in round 0).
            assert!(
                stuck > 0,
                "P = {p}, seed {seed}: a cut link must stop someone"
            );
            let mut out = Vec::new();
            match net.ranks[to as usize].progress(&mut out) {
                Progress::Waiting(m) => {
                    assert_eq!((m.epoch, m.round, m.waiting_for), (1, 0, from));
                    assert_eq!(
                        m.to_string()
                            .split("for rank ")
                            .nth(1)
                            .map(|s| s.starts_with(&from.to_string())),
                        Some(true)
                    );
                }
                other => panic!("rank {to} should wait for rank {from}, is {other:?}"),
            }
        }
    }
}

#[test]
fn lost_messages_stop_the_barrier_safely_and_leave_a_diagnostic() {
    for p in 2..=8u32 {
        for seed in 0..100u64 {
            let mut net = Network::new(p, 3);
            net.run_random(&mut Rng::new(seed), 10);
            // Safety was asserted at every completion; whoever is stuck says why.
            for r in 0..p as usize {
                if net.inside[r] {
                    let mut out = Vec::new();
                    assert!(matches!(
                        net.ranks[r].progress(&mut out),
                        Progress::Waiting(_)
                    ));
                }
            }
        }
    }
}

#[test]
fn the_diagnostic_lists_who_has_not_been_heard_from() {
    let mut b = Barrier::new(0, 8);
    let t = Instant::now();
    b.enter(t);
    let mut out = Vec::new();
    let Progress::Waiting(m) = b.progress(&mut out) else {
        panic!("waits")
    };
    assert_eq!(m.not_heard_from, vec![1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(
        m.to_string(),
        "barrier epoch 1 on rank 0: waiting in round 1 of 3 for rank 7; no word yet from ranks 1, 2, 3, 4, 5, 6, 7"
    );
    b.on_message(7, 1, 0).unwrap();
    let Progress::Waiting(m) = b.progress(&mut out) else {
        panic!("waits")
    };
    assert_eq!((m.round, m.waiting_for), (1, 6));
    assert_eq!(m.not_heard_from, vec![1, 2, 3, 4, 5, 6], "rank 7 arrived");
    b.on_message(6, 1, 1).unwrap();
    let Progress::Waiting(m) = b.progress(&mut out) else {
        panic!("waits")
    };
    assert_eq!(
        m.not_heard_from,
        vec![1, 2, 3, 4],
        "ranks 5, 6, 7 arrived (5 through 6)"
    );
}

/// Drives ranks `ranks` of `bs` until none can move, delivering every
/// signal at once; returns the epochs that finished, per rank.
fn run_to_rest(bs: &mut [Barrier], ranks: &[usize]) -> Vec<Vec<u64>> {
    let mut done = vec![Vec::new(); bs.len()];
    let mut out = Vec::new();
    for &r in ranks {
        bs[r].enter(Instant::now());
    }
    loop {
        let mut moved = false;
        for &r in ranks {
            if let Progress::Done { epoch } = bs[r].progress(&mut out) {
                done[r].push(epoch);
            }
            for s in out.drain(..) {
                let from = bs[r].rank;
                bs[s.to as usize]
                    .on_message(from, s.epoch, s.round)
                    .unwrap();
                moved = true;
            }
        }
        if !moved {
            return done;
        }
    }
}

#[test]
fn a_restarted_rank_adopts_its_peers_epoch_and_completes_their_pending_barrier() {
    let mut bs: Vec<Barrier> = (0..3).map(|r| Barrier::new(r, 3)).collect();
    // Two barriers with everyone.
    for _ in 0..2 {
        let done = run_to_rest(&mut bs, &[0, 1, 2]);
        assert!(done.iter().all(|d| d.len() == 1), "{done:?}");
    }
    // Rank 1 dies; 0 and 2 enter barrier 3 and wait for it.
    let done = run_to_rest(&mut bs, &[0, 2]);
    assert!(
        done.iter().all(|d| d.is_empty()),
        "nobody passes without rank 1"
    );
    assert_eq!((bs[0].epoch(), bs[2].epoch()), (3, 3));
    // Rank 1 restarts at epoch 1 and learns epoch 3 from its peers' hellos.
    bs[1] = Barrier::new(1, 3);
    let theirs = bs[0].epoch();
    assert!(bs[1].adopt(theirs));
    assert!(!bs[1].adopt(2), "only forward");
    assert_eq!(bs[1].epoch(), 3);
    // Rank 0's round-0 signal to rank 1 was lost with the old rank 1: rank
    // 0 sends again what it sent to rank 1 in this barrier.
    let again = bs[0].sent_to(1);
    assert_eq!(
        again,
        vec![Signal {
            to: 1,
            epoch: 3,
            round: 0
        }]
    );
    assert!(
        bs[2].sent_to(1).is_empty(),
        "rank 2 signals rank 1 in round 1 only"
    );
    for s in again {
        bs[1].on_message(0, s.epoch, s.round).unwrap();
    }
    let done = run_to_rest(&mut bs, &[0, 1, 2]);
    assert_eq!(done, vec![vec![3], vec![3], vec![3]]);
    // Once a rank has entered a barrier it never adopts.
    assert!(!bs[1].adopt(9));
}

/// Scale (issue 18): at P = 1 024 and 4 096 — and at a P that is not a
/// power of two — a barrier takes ceil(log2 P) rounds and each rank sends
/// exactly one message per round: P * ceil(log2 P) messages in all, none
/// repeated, whatever the order of delivery.
#[test]
fn at_thousands_of_ranks_each_rank_sends_one_message_per_round() {
    for (p, want_rounds) in [(1024u32, 10u32), (3000, 12), (4096, 12)] {
        assert_eq!(rounds(p), want_rounds, "P = {p}");
        let epochs = 2;
        let mut net = Network::new(p, epochs);
        net.run_random(&mut Rng::new(u64::from(p)), 0);
        finished_every_epoch_once(&net, epochs);
        for (r, sent) in net.sent.iter().enumerate() {
            assert_eq!(
                *sent,
                epochs * u64::from(want_rounds),
                "P = {p}: rank {r} sent {sent} messages over {epochs} barriers"
            );
        }
    }
}

#[test]
fn messages_of_two_epochs_fit_without_growing_the_arrival_list() {
    // Rank 0 of 8 hears every round of epoch 1 and of epoch 2 before it
    // looks: six messages, the most that can be outstanding.
    let mut b = Barrier::new(0, 8);
    let cap = b.arrived.capacity();
    assert!(cap >= 6, "room for two epochs of three rounds: {cap}");
    b.enter(Instant::now());
    for epoch in [2, 1] {
        for round in (0..3).rev() {
            b.on_message(b.signalled_by(round), epoch, round).unwrap();
        }
    }
    assert_eq!(
        b.on_message(b.signalled_by(1), 2, 1),
        Err(BarrierError::Duplicate {
            from: 6,
            epoch: 2,
            round: 1
        })
    );
    let mut out = Vec::new();
    assert_eq!(b.advance(&mut out), Advance::Done { epoch: 1 });
    assert_eq!(out.len(), 3, "one signal per round");
    assert_eq!(b.missing(), None, "no barrier runs");
    b.enter(Instant::now());
    assert_eq!(b.advance(&mut out), Advance::Done { epoch: 2 });
    assert!(b.arrived.is_empty());
    assert_eq!(b.arrived.capacity(), cap, "nothing was reallocated");
    b.enter(Instant::now());
    assert_eq!(b.advance(&mut out), Advance::Waiting);
    let m = b.missing().unwrap();
    assert_eq!((m.epoch, m.round, m.waiting_for), (3, 0, 7));
}
