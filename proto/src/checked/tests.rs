//! The happens-before rules, each checked under many interleavings of the
//! harness: a racy program reports the same races whatever the timing, an
//! ordered one reports none.

use super::harness::{Sim, Step};
use super::sync::{BarrierClocks, Cells};
use super::*;
use crate::v1::Cmp;
use std::sync::Arc;

const SEEDS: u64 = 40;
const SLICE: std::ops::Range<u64> = 0..256;
const SITE: &str = "data[0, 0:64]";

/// Runs `programs` under `SEEDS` interleavings; returns the (sorted)
/// reports, asserting they are the same in every one.
fn reports(programs: impl Fn() -> Vec<Vec<Step>>) -> Vec<String> {
    let mut first: Option<Vec<String>> = None;
    for seed in 0..SEEDS {
        let mut got = Sim::new(programs()).run(seed);
        got.sort();
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(f, &got, "seed {seed} reported differently"),
        }
    }
    first.unwrap_or_default()
}

fn per_rank(p: u32, f: impl Fn(u32, u32, u32) -> Vec<Step>) -> Vec<Vec<Step>> {
    (0..p).map(|r| f(r, (r + 1) % p, (r + p - 1) % p)).collect()
}

#[test]
fn stage_then_barrier_then_remote_load_is_ordered() {
    for p in [2, 4, 8] {
        let got = reports(|| {
            per_rank(p, |_, next, _| {
                vec![
                    Step::Store(SLICE, SITE),
                    Step::Barrier,
                    Step::Remote(AccessKind::Get, next, SLICE, SITE),
                ]
            })
        });
        assert!(got.is_empty(), "P={p}: {got:?}");
    }
}

#[test]
fn remote_load_without_the_barrier_races_the_owners_store_whatever_the_timing() {
    for p in [2, 4] {
        let got = reports(|| {
            per_rank(p, |_, next, _| {
                vec![
                    Step::Store(SLICE, SITE),
                    Step::Remote(AccessKind::Get, next, SLICE, SITE),
                ]
            })
        });
        assert_eq!(got.len(), p as usize, "P={p}: one race per owner: {got:?}");
        let r0 = got
            .iter()
            .find(|r| r.contains("rank 0's window"))
            .expect("rank 0's race");
        assert!(r0.contains("rank 0 stored into its own"), "{r0}");
        assert!(r0.contains(&format!("rank {} read", p - 1)), "{r0}");
        assert!(r0.contains("bytes 0..256") && r0.contains(SITE), "{r0}");
        assert!(
            r0.contains("in load mode, stage, then barrier, then remote_load"),
            "{r0}"
        );
    }
}

#[test]
fn remote_store_then_barrier_then_read_is_ordered() {
    let got = reports(|| {
        per_rank(4, |_, next, _| {
            vec![
                Step::Remote(AccessKind::Put, next, SLICE, SITE),
                Step::Barrier,
                Step::Load(SLICE, SITE),
            ]
        })
    });
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn a_barrier_before_the_store_does_not_order_it_with_the_receivers_read() {
    for p in [2, 4] {
        let got = reports(|| {
            per_rank(p, |_, next, _| {
                vec![
                    Step::Barrier,
                    Step::Remote(AccessKind::Put, next, SLICE, SITE),
                    Step::Load(SLICE, SITE),
                ]
            })
        });
        assert_eq!(got.len(), p as usize, "{got:?}");
        assert!(
            got.iter()
                .all(|r| r.contains("in store mode, remote_store, then barrier"))
        );
    }
}

/// Step 06's put mode: put, notify the target, wait for the notify from
/// the rank that targets us, then read; `read_early` reads before the wait.
fn put_notify_wait(p: u32, read_early: bool) -> Vec<Vec<Step>> {
    per_rank(p, |_, next, _| {
        let mut s = vec![
            Step::Remote(AccessKind::Put, next, SLICE, SITE),
            Step::Notify(next, 0, true, 1),
        ];
        if read_early {
            s.push(Step::Load(SLICE, SITE));
            s.push(Step::Wait(0, Cmp::Ge, 1));
        } else {
            s.push(Step::Wait(0, Cmp::Ge, 1));
            s.push(Step::Load(SLICE, SITE));
        }
        s
    })
}

#[test]
fn a_wait_on_a_notify_sent_after_the_put_orders_the_put_before_the_read() {
    for p in [2, 4] {
        assert!(reports(|| put_notify_wait(p, false)).is_empty());
    }
}

#[test]
fn reading_before_the_wait_races_the_put() {
    for p in [2, 4] {
        let got = reports(|| put_notify_wait(p, true));
        assert_eq!(got.len(), p as usize, "{got:?}");
    }
}

/// A mesh all-reduce: stage, notify every peer, wait for every peer, read
/// every peer; `early` reads before the waits.
fn mesh(p: u32, early: bool) -> Vec<Vec<Step>> {
    (0..p)
        .map(|r| {
            let peers: Vec<u32> = (0..p).filter(|&q| q != r).collect();
            let mut s = vec![Step::Store(SLICE, SITE)];
            s.extend(
                peers
                    .iter()
                    .map(|&q| Step::Notify(q, u64::from(r), true, 1)),
            );
            let reads = peers
                .iter()
                .map(|&q| Step::Remote(AccessKind::Get, q, SLICE, SITE));
            let waits = peers.iter().map(|&q| Step::Wait(u64::from(q), Cmp::Ge, 1));
            if early {
                s.extend(reads.collect::<Vec<_>>());
                s.extend(waits);
            } else {
                s.extend(waits.collect::<Vec<_>>());
                s.extend(reads);
            }
            s
        })
        .collect()
}

#[test]
fn a_mesh_allreduce_ordered_by_per_peer_signals_is_accepted_without_a_barrier() {
    for p in [2, 4, 8] {
        assert!(reports(|| mesh(p, false)).is_empty(), "P={p}");
    }
}

#[test]
fn a_mesh_allreduce_reading_peers_before_their_signal_races() {
    for p in [2, 4] {
        let got = reports(|| mesh(p, true));
        assert_eq!(got.len(), (p * (p - 1)) as usize, "{got:?}");
    }
}

/// Two rounds over one signal cell per rank: stage a chunk, notify the
/// right neighbour, wait, read the left neighbour's chunk. `reuse` waits
/// for `>= 1` again in round two (the row reused without clearing).
fn ring(p: u32, reuse: bool) -> Vec<Vec<Step>> {
    per_rank(p, |_, right, left| {
        let second = if reuse { 1 } else { 2 };
        vec![
            Step::Store(0..128, "scratch[0, 0:32]"),
            Step::Notify(right, 0, true, 1),
            Step::Wait(0, Cmp::Ge, 1),
            Step::Remote(AccessKind::Get, left, 0..128, "scratch[0, 0:32]"),
            Step::Store(128..256, "scratch[0, 32:64]"),
            Step::Notify(right, 0, true, 1),
            Step::Wait(0, Cmp::Ge, second),
            Step::Remote(AccessKind::Get, left, 128..256, "scratch[0, 32:64]"),
        ]
    })
}

#[test]
fn a_wait_that_passed_on_a_stale_signal_value_orders_nothing() {
    for p in [2, 4] {
        assert!(reports(|| ring(p, false)).is_empty(), "P={p}");
        let got = reports(|| ring(p, true));
        assert_eq!(got.len(), p as usize, "{got:?}");
        assert!(
            got.iter().all(|r| r.contains("scratch[0, 32:64]")),
            "{got:?}"
        );
    }
}

#[test]
fn two_ranks_storing_one_slice_race_unless_both_add_atomically() {
    for p in [3, 4] {
        let plain = reports(|| {
            (0..p)
                .map(|r| match r {
                    0 => vec![],
                    _ => vec![Step::Remote(AccessKind::Put, 0, SLICE, SITE)],
                })
                .collect()
        });
        assert_eq!(plain.len(), ((p - 1) * (p - 2) / 2) as usize, "{plain:?}");
        assert!(
            plain
                .iter()
                .all(|r| r.contains("two ranks write the same bytes"))
        );
        let atomic = reports(|| {
            (0..p)
                .map(|r| match r {
                    0 => vec![],
                    _ => vec![Step::Remote(AccessKind::AtomicAdd, 0, SLICE, SITE)],
                })
                .collect()
        });
        assert!(atomic.is_empty(), "{atomic:?}");
    }
}

#[test]
fn an_atomic_add_and_a_read_of_the_same_cells_race() {
    let got = reports(|| {
        vec![
            vec![],
            vec![Step::Remote(AccessKind::AtomicAdd, 0, 0..8, "counter")],
            vec![Step::Remote(AccessKind::Get, 0, 0..8, "counter")],
        ]
    });
    assert_eq!(got.len(), 1, "{got:?}");
}

fn access(rank: u32, tick: u64, kind: AccessKind) -> Access {
    Access {
        at: Epoch { rank, tick },
        kind,
        op: 0,
        barrier_epoch: 0,
        site: Arc::from(""),
    }
}

#[test]
fn a_fetch_add_reply_orders_its_origin_after_earlier_atomics_on_the_cell() {
    // Rank 1 puts, then fetch_adds a lock cell; rank 2 fetch_adds it next
    // and acquires the reply's clock: its read is ordered after the put.
    let mut d = Detector::new(0, &["data"]);
    let mut cells = Cells::new();
    let mut one = RankClock::new(1, 3);
    let mut two = RankClock::new(2, 3);
    assert!(
        d.access(
            0,
            0..256,
            &access(1, one.epoch().tick, AccessKind::Put),
            one.clock()
        )
        .is_empty()
    );
    let sent = one.release();
    cells.atomic((0, 512), &sent);
    let reply = cells.atomic((0, 512), &two.release());
    two.acquire(&reply);
    let read = access(2, two.epoch().tick, AccessKind::Get);
    assert!(d.access(0, 0..256, &read, two.clock()).is_empty());
    // Without the atomic, the same read races.
    let three = RankClock::new(2, 3);
    let racy = access(2, three.epoch().tick, AccessKind::Get);
    assert_eq!(d.access(0, 128..384, &racy, three.clock()).len(), 1);
}

#[test]
fn each_race_is_reported_once_however_often_the_loop_repeats_it() {
    let mut d = Detector::new(0, &["data"]);
    let owner = RankClock::new(0, 2);
    let mut peer = RankClock::new(1, 2);
    for _ in 0..10 {
        d.access(
            0,
            SLICE,
            &access(0, owner.epoch().tick, AccessKind::Store),
            owner.clock(),
        );
        let got = d.access(
            0,
            SLICE,
            &access(1, peer.epoch().tick, AccessKind::Get),
            peer.clock(),
        );
        assert!(got.len() <= 1);
        peer.release();
    }
    assert_eq!(d.races(), 19, "every repeat counts");
}

#[test]
fn the_shadow_of_a_large_window_costs_its_live_regions_not_its_bytes() {
    let mut d = Detector::new(0, &["data"]);
    let me = RankClock::new(0, 2);
    let store = access(0, me.epoch().tick, AccessKind::Store);
    for i in 0..300u64 {
        // 300 disjoint regions of a 64 MiB window, then one store over all.
        d.access(0, i * 200_000..i * 200_000 + 4096, &store, me.clock());
    }
    assert_eq!(d.ranges(), 300);
    d.access(0, 0..64 << 20, &store, me.clock());
    assert_eq!(d.ranges(), 1, "one history over the whole window merges");
}

#[test]
fn clocks_join_and_order_componentwise() {
    let mut a = VectorClock::from_wire(vec![1, 0, 3]);
    let b = VectorClock::from_wire(vec![0, 2, 1]);
    assert!(!a.le(&b) && !b.le(&a));
    a.join(&b);
    assert_eq!(a.as_wire(), &[1, 2, 3]);
    assert!(b.le(&a));
    assert_eq!(a.to_string(), "[1 2 3]");
}

#[test]
fn barrier_clocks_hold_every_entry_after_the_last_round() {
    let mut b = BarrierClocks::new();
    let entry = VectorClock::from_wire(vec![2, 0, 0]);
    b.heard(1, &VectorClock::from_wire(vec![0, 5, 0]));
    b.heard(2, &VectorClock::from_wire(vec![0, 0, 9]));
    assert_eq!(b.outgoing(1, &entry).as_wire(), &[2, 5, 0]);
    assert_eq!(b.finish(1, &entry).as_wire(), &[2, 5, 0]);
    assert_eq!(
        b.outgoing(2, &entry).as_wire(),
        &[2, 0, 9],
        "the early epoch is kept"
    );
}

#[test]
fn a_wait_acquires_the_notifies_of_the_units_it_needed() {
    let mut cells = Cells::new();
    let c = |v: Vec<u64>| VectorClock::from_wire(v);
    assert!(
        cells.passed((1, 0), Cmp::Ge, 0).is_none(),
        "the initial value"
    );
    cells.notified((1, 0), true, 1, &c(vec![3, 0]));
    cells.notified((1, 0), true, 1, &c(vec![0, 4]));
    assert_eq!(cells.passed((1, 0), Cmp::Ge, 1), Some(c(vec![3, 0])));
    assert_eq!(cells.passed((1, 0), Cmp::Ge, 2), Some(c(vec![3, 4])));
    // A credit taken back: the next wait for 1 needs the second notify.
    cells.notified((1, 0), true, -1, &c(vec![9, 9]));
    assert_eq!(cells.passed((1, 0), Cmp::Ge, 1), Some(c(vec![0, 4])));
    // A set replaces every unit.
    cells.notified((1, 0), false, 1, &c(vec![5, 5]));
    assert_eq!(cells.passed((1, 0), Cmp::Eq, 1), Some(c(vec![5, 5])));
    cells.reset((1, 0));
    assert!(cells.passed((1, 0), Cmp::Ge, 1).is_none());
}

/// Credits: each use waits for one unit and takes it back (-1), so one
/// cell serves many rounds; a fast notifier's early credit waits its turn.
#[test]
fn self_clearing_credits_order_each_round_by_its_own_notify() {
    let got = reports(|| {
        per_rank(2, |_, next, prev| {
            let mut s = Vec::new();
            for round in 0..3u64 {
                let at = round * 64..round * 64 + 64;
                s.push(Step::Store(at.clone(), "x"));
                s.push(Step::Notify(next, 0, true, 1));
                s.push(Step::Wait(0, Cmp::Ge, 1));
                s.push(Step::Notify(u32::MAX, 0, true, -1));
                s.push(Step::Remote(AccessKind::Get, prev, at, "x"));
            }
            s
        })
    });
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn a_signal_row_cleared_by_its_owner_orders_by_the_next_notify_only() {
    let got = reports(|| {
        vec![
            vec![
                Step::Store(0..128, "scratch[0, 0:32]"),
                Step::Notify(1, 0, true, 1),
                Step::Barrier,
                Step::Store(128..256, "scratch[0, 32:64]"),
                Step::Notify(1, 0, true, 1),
            ],
            vec![
                Step::Wait(0, Cmp::Ge, 1),
                Step::Remote(AccessKind::Get, 0, 0..128, "scratch[0, 0:32]"),
                Step::Clear(0),
                Step::Barrier,
                Step::Wait(0, Cmp::Ge, 1),
                Step::Remote(AccessKind::Get, 0, 128..256, "scratch[0, 32:64]"),
            ],
        ]
    });
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn a_counter_notified_forever_keeps_bounded_history_and_its_oldest_clock() {
    let mut cells = Cells::new();
    let first = VectorClock::from_wire(vec![1, 0]);
    cells.notified((1, 0), true, 1, &first);
    for i in 0..10_000u64 {
        cells.notified((1, 0), true, 1, &VectorClock::from_wire(vec![0, i + 2]));
    }
    let c = cells.passed((1, 0), Cmp::Ge, 1).expect("units kept");
    assert!(
        first.le(&c),
        "the oldest unit's clock is still acquired: {c}"
    );
}

/// Rank 1 puts `regions` disjoint slices into rank 0's window, then both
/// pass `barriers` barriers.
fn puts_then_barriers(regions: u64, barriers: usize) -> Vec<Vec<Step>> {
    let mut one: Vec<Step> = (0..regions)
        .map(|i| Step::Remote(AccessKind::Put, 0, i * 512..i * 512 + 256, SITE))
        .collect();
    one.extend(std::iter::repeat_n(Step::Barrier, barriers));
    vec![vec![Step::Barrier; barriers], one]
}

#[test]
fn the_shadow_forgets_what_the_barrier_before_the_last_ordered() {
    for seed in 0..SEEDS {
        let kept = |barriers| Sim::new(puts_then_barriers(100, barriers)).run_to_end(seed);
        assert_eq!(kept(0).ranges()[0], 100, "seed {seed}: nothing orders them");
        assert_eq!(
            kept(1).ranges()[0],
            100,
            "seed {seed}: one barrier: a rank may still be in it"
        );
        assert_eq!(kept(2).ranges()[0], 0, "seed {seed}: the second barrier");
    }
}

#[test]
fn forgetting_after_barriers_keeps_every_race_report() {
    // Epochs of put, barrier, read (ordered); then a put and a read of
    // one slice with no barrier between them, and accesses of other
    // slices around the barriers that must not hide it.
    let got = reports(|| {
        let mut zero = Vec::new();
        let mut one = Vec::new();
        for k in 0..6u64 {
            let slice = k * 256..k * 256 + 256;
            one.push(Step::Remote(AccessKind::Put, 0, slice.clone(), SITE));
            zero.push(Step::Barrier);
            one.push(Step::Barrier);
            zero.push(Step::Load(slice, SITE));
        }
        one.push(Step::Remote(AccessKind::Put, 0, SLICE, SITE));
        zero.push(Step::Load(SLICE, SITE));
        zero.push(Step::Barrier);
        one.push(Step::Barrier);
        vec![zero, one]
    });
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains("rank 1 put into"), "{}", got[0]);
}

#[test]
fn a_shadow_over_its_budget_forgets_the_least_recently_touched_and_counts_them() {
    let mut s = Shadow::with_budget(0, "data", 100);
    let owner = RankClock::new(0, 2);
    let store = |i: u64| {
        let a = access(0, owner.epoch().tick, AccessKind::Store);
        (i * 512..i * 512 + 256, Access { op: i + 1, ..a })
    };
    for i in 0..1000 {
        let (bytes, a) = store(i);
        s.access(bytes, &a, owner.clock());
        assert!(s.ranges() <= 100, "{} ranges", s.ranges());
    }
    assert!(s.forgotten() >= 900, "{} forgotten", s.forgotten());
    // The newest stores are still known; the oldest were forgotten.
    let peer = RankClock::new(1, 2);
    let read = |i: u64| {
        let bytes = i * 512..i * 512 + 256;
        s.conflicts(
            bytes,
            &access(1, peer.epoch().tick, AccessKind::Get),
            peer.clock(),
        )
    };
    assert_eq!(read(999).len(), 1);
    assert!(read(0).is_empty());
}

#[test]
fn a_signal_cell_forgets_the_clocks_a_barrier_ordered_but_not_its_count() {
    let mut cells = Cells::new();
    let old = VectorClock::from_wire(vec![1, 0]);
    let new = VectorClock::from_wire(vec![0, 5]);
    cells.notified((1, 0), true, 2, &old);
    cells.atomic((0, 8), &old);
    cells.forget_ordered_before(&VectorClock::from_wire(vec![1, 1]));
    cells.notified((1, 0), true, 1, &new);
    // Two units with nothing to acquire, then the new notify's.
    let two = cells.passed((1, 0), Cmp::Ge, 2).expect("units kept");
    assert!(
        !new.le(&two),
        "a wait for the old units acquires the new one: {two}"
    );
    let three = cells.passed((1, 0), Cmp::Ge, 3).expect("units kept");
    assert!(new.le(&three), "{three}");
    assert_eq!(cells.len(), 1, "the atomic cell's covered clock is gone");
}
