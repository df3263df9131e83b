//! Atomics under faults, checked as a history (`common::linear`). Clients
//! of three kinds — an embedded rank, Rust gRPC clients of two daemons —
//! run fetch_add and compare_swap on three counters and swap on two
//! registers of a 4-rank cluster, paced, for a fixed time, while on a
//! schedule of times:
//!
//! - rank 3 — a gRPC front of two clients, and a counter's rank — is
//!   killed and restarted (its windows start zeroed: its counter's
//!   history is checked in two parts, before the kill and after the
//!   restart);
//! - rank 2 — a counter's and a register's — is stalled (SIGSTOP) past the
//!   op timeout and resumed.
//!
//! Every call's invocation, response or error is recorded, and each
//! object's history must be linearizable: for a counter, distinct values
//! in real-time order, every value no successful call took explained by a
//! failed call that could have taken it then, and what a compare_swap
//! that found another value read lying between the calls around it; for
//! a register, the values chained from 0 through every successful swap to
//! the final one. The test also asserts that each fault met calls — a
//! failure through the dead front, successes through the restarted one
//! and on its counter, an op timeout from the stalled rank — so that a
//! schedule that missed the clients cannot pass. The Python client's
//! history is checked by `client/python/tests/test_linearizable.py`; a
//! cut link, as root, by `client/tests/partition.rs`. Seeded
//! (`PLD_TEST_SEED`); a failure prints the history.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::linear::{Call, Outcome, check_counter, check_swaps};
use pld_client::Client;
use pld_server::{Dtype, Rank, TransportKind};
use pld_tests::{Daemon, loopback_peers, rank_config, run};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The objects: (rank, byte offset) of int64 cells in window `data`.
/// Counters first, then swap registers.
const CELLS: [(u32, u64); 5] = [(1, 0), (2, 64), (3, 128), (1, 192), (2, 256)];
const COUNTERS: usize = 3;
/// The restarted rank's counter.
const RESTARTED: usize = 2;

/// Between a client's calls: the calls span the whole schedule.
const PACE: Duration = Duration::from_millis(3);

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

type History = Arc<Mutex<Vec<Call>>>;

/// What a client asks.
#[derive(Clone, Copy)]
enum Op {
    FetchAdd,
    /// From the value the client last saw to one more.
    CompareSwap(i64),
    /// Write this value (no other call writes it).
    Swap(i64),
}

/// Runs client number `id` (named `name`) through `call` until `stop`,
/// recording each call.
async fn client<F, Fut>(
    id: u64,
    name: String,
    seed: u64,
    history: History,
    stop: Arc<AtomicBool>,
    call: F,
) where
    F: Fn(usize, Op) -> Fut,
    Fut: std::future::Future<Output = Result<i64, String>>,
{
    let mut rng = Rng(seed | 1);
    let mut seen = [0i64; COUNTERS];
    let mut seq = 0i64;
    while !stop.load(Ordering::Relaxed) {
        let cell = rng.below(CELLS.len() as u64) as usize;
        let op = if cell >= COUNTERS {
            seq += 1;
            Op::Swap(((id as i64 + 1) << 40) | seq)
        } else if rng.below(3) == 0 {
            Op::CompareSwap(seen[cell])
        } else {
            Op::FetchAdd
        };
        let invoked = Instant::now();
        let got = call(cell, op).await;
        let returned = Instant::now();
        let (wrote, outcome) = match (op, got) {
            (_, Err(e)) => (
                match op {
                    Op::Swap(w) => Some(w),
                    _ => None,
                },
                Outcome::Failed(e),
            ),
            (Op::FetchAdd, Ok(v)) => {
                seen[cell] = v + 1;
                (None, Outcome::Took(v))
            }
            (Op::CompareSwap(e), Ok(v)) if v == e => {
                seen[cell] = v + 1;
                (None, Outcome::Took(v))
            }
            (Op::CompareSwap(_), Ok(v)) => {
                seen[cell] = v;
                (None, Outcome::Saw(v))
            }
            (Op::Swap(w), Ok(v)) => (Some(w), Outcome::Swapped(v)),
        };
        history.lock().unwrap().push(Call {
            client: name.clone(),
            cell,
            wrote,
            invoked,
            returned,
            outcome,
        });
        tokio::time::sleep(PACE).await;
    }
}

/// When each fault happened.
struct Schedule {
    killed: Instant,
    respawned: Instant,
    ready: Instant,
    stalled: Instant,
    resumed: Instant,
}

/// The restarted rank's counter in its two lives: the calls of each, and
/// the failed calls that may have applied in each.
fn lives<'a>(calls: &[&'a Call], s: &Schedule) -> [(Vec<&'a Call>, Vec<&'a Call>); 2] {
    let (mut before, mut after) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for c in calls {
        let ok = !c.failed();
        if ok && c.returned < s.respawned {
            // Answered by the old process (it never answers after).
            before.0.push(*c);
        } else if ok && c.invoked > s.killed {
            // Sent after the old process died: the new one answered.
            after.0.push(*c);
        } else if ok {
            // Invoked before the kill, answered after the respawn: by
            // either; it may have taken a value in the second life.
            after.1.push(*c);
        } else {
            if c.invoked < s.killed {
                before.1.push(*c);
            }
            if c.returned > s.respawned {
                after.1.push(*c);
            }
        }
    }
    [before, after]
}

#[test]
fn atomics_and_swaps_stay_linearizable_while_ranks_die_and_stall() {
    run(Duration::from_secs(240), async {
        let seed: u64 = std::env::var("PLD_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5eed);
        let t = TransportKind::Tcp;
        let peers = loopback_peers(4);
        let grpc = loopback_peers(4);
        let args = |r: usize| -> Vec<String> {
            [
                "--grpc",
                grpc[r].as_str(),
                "--op-timeout",
                "2s",
                "--window",
                "data=1MiB",
                "--window",
                "signal=64KiB",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        let spawn = |r: u32| {
            let a = args(r as usize);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            Daemon::spawn(r, &peers, t, &a)
        };
        let mut daemons: Vec<Daemon> = (1..4).map(spawn).collect();
        let mut cfg = rank_config(0, &peers, t);
        cfg.windows = ["data=1MiB", "signal=64KiB"]
            .iter()
            .map(|w| w.parse().unwrap())
            .collect();
        cfg.op_timeout = Duration::from_secs(2);
        let rank = Arc::new(Rank::start(cfg).await.unwrap());
        for d in &mut daemons {
            d.wait_ready(Duration::from_secs(30));
        }
        println!("seed {seed}");
        let history: History = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let data = rank.window("data").unwrap();
        let mut clients = tokio::task::JoinSet::new();
        {
            let (rank, h, stop) = (rank.clone(), history.clone(), stop.clone());
            clients.spawn(client(
                0,
                "embedded rank 0".into(),
                seed,
                h,
                stop,
                move |cell, op| {
                    let rank = rank.clone();
                    async move {
                        let (r, at) = CELLS[cell];
                        match op {
                            Op::FetchAdd => rank.fetch_add(r, data, at, Dtype::Int64, 1).await,
                            Op::CompareSwap(e) => {
                                rank.compare_swap(r, data, at, Dtype::Int64, e, e + 1).await
                            }
                            Op::Swap(w) => rank.swap(r, data, at, Dtype::Int64, w).await,
                        }
                        .map_err(|e| e.to_string())
                    }
                },
            ));
        }
        // Rust gRPC clients of rank 3 (killed and restarted) and rank 1.
        for (i, front) in [3usize, 3, 1].into_iter().enumerate() {
            let cl = Client::connect(&grpc[front]).await.unwrap();
            let (h, stop) = (history.clone(), stop.clone());
            let name = format!("gRPC client {i} of rank {front}");
            let id = 1 + i as u64;
            clients.spawn(client(id, name, seed + id, h, stop, move |cell, op| {
                let cl = cl.clone();
                async move {
                    let (r, at) = CELLS[cell];
                    let data = cl.window("data").map_err(|e| e.to_string())?;
                    match op {
                        Op::FetchAdd => cl.fetch_add(r, data, at, Dtype::Int64, 1).await,
                        Op::CompareSwap(e) => {
                            cl.compare_swap(r, data, at, Dtype::Int64, e, e + 1).await
                        }
                        Op::Swap(w) => {
                            cl.cell_op(r, data, at, Dtype::Int64, pld_proto::CellOp::Swap(w))
                                .await
                        }
                    }
                    .map_err(|e| e.to_string())
                }
            }));
        }
        // The faults, on a schedule of times (the clients are paced, so
        // each fault meets calls).
        let at = |s: f64| tokio::time::sleep(Duration::from_secs_f64(s));
        at(1.0).await;
        daemons[2].kill();
        let killed = Instant::now();
        at(1.5).await;
        let respawned = Instant::now();
        daemons[2] = spawn(3);
        daemons[2].wait_ready(Duration::from_secs(30));
        let ready = Instant::now();
        at(1.5).await;
        daemons[1].pause();
        let stalled = Instant::now();
        // Past the op timeout (2 s): calls to rank 2 fail, and it applies
        // them when it resumes.
        at(3.0).await;
        daemons[1].resume();
        let resumed = Instant::now();
        at(1.5).await;
        stop.store(true, Ordering::Relaxed);
        while let Some(j) = clients.join_next().await {
            j.unwrap();
        }
        let s = Schedule {
            killed,
            respawned,
            ready,
            stalled,
            resumed,
        };
        let calls = history.lock().unwrap().clone();
        let mut failures = Vec::new();
        // Each fault met calls.
        let through_3 = |c: &&Call| c.client.ends_with("of rank 3");
        let met = [
            (
                "a call through rank 3 failed while it was dead",
                calls
                    .iter()
                    .filter(through_3)
                    .any(|c| c.failed() && c.invoked > s.killed && c.invoked < s.respawned),
            ),
            (
                "a call through rank 3 succeeded after its restart",
                calls
                    .iter()
                    .filter(through_3)
                    .any(|c| !c.failed() && c.invoked > s.ready),
            ),
            (
                "a call on rank 3's counter succeeded after its restart",
                calls
                    .iter()
                    .any(|c| c.cell == RESTARTED && !c.failed() && c.invoked > s.ready),
            ),
            (
                "a call to the stalled rank 2 timed out",
                calls.iter().any(|c| {
                    CELLS[c.cell].0 == 2
                        && c.invoked > s.stalled
                        && c.invoked < s.resumed
                        && matches!(&c.outcome, Outcome::Failed(e) if e.contains("got no reply within"))
                }),
            ),
        ];
        for (what, happened) in met {
            if !happened {
                failures.push(format!(
                    "the schedule missed the clients: no case where {what}"
                ));
            }
        }
        for (cell, (r, at)) in CELLS.iter().enumerate() {
            let bytes = rank.get(*r, data, *at, 8).await.unwrap();
            let last = i64::from_le_bytes(bytes[..8].try_into().unwrap());
            let mine: Vec<&Call> = calls.iter().filter(|c| c.cell == cell).collect();
            let verdict = if cell >= COUNTERS {
                check_swaps(&mine, last)
            } else if cell == RESTARTED {
                let [(a, fa), (b, fb)] = lives(&mine, &s);
                check_counter(&a, &fa, None)
                    .map_err(|e| format!("before the kill: {e}"))
                    .and_then(|()| {
                        check_counter(&b, &fb, Some(last))
                            .map_err(|e| format!("after the restart: {e}"))
                    })
            } else {
                let failed: Vec<&Call> = mine.iter().filter(|c| c.failed()).copied().collect();
                check_counter(&mine, &failed, Some(last))
            };
            if let Err(e) = verdict {
                failures.push(format!("cell {cell} (rank {r}): {e}"));
            }
        }
        if std::env::var_os("PLD_TEST_PRINT_HISTORY").is_some() || !failures.is_empty() {
            for c in &calls {
                println!("{c:?}");
            }
            assert!(failures.is_empty(), "seed {seed}: {failures:#?}");
        }
    });
}

/// The checks themselves, on histories made by hand: each rule they
/// enforce, broken once.
mod checks {
    use super::*;

    fn call(cell: usize, t: (u64, u64), wrote: Option<i64>, outcome: Outcome) -> Call {
        let base = Instant::now();
        Call {
            client: "c".into(),
            cell,
            wrote,
            invoked: base + Duration::from_millis(t.0),
            returned: base + Duration::from_millis(t.1),
            outcome,
        }
    }

    fn refs(v: &[Call]) -> Vec<&Call> {
        v.iter().collect()
    }

    #[test]
    fn a_counter_history_that_is_linearizable_passes() {
        let h = vec![
            call(0, (0, 10), None, Outcome::Took(0)),
            call(0, (20, 30), None, Outcome::Failed("timed out".into())),
            call(0, (40, 50), None, Outcome::Took(2)),
            call(0, (45, 60), None, Outcome::Saw(3)),
        ];
        let failed: Vec<&Call> = h.iter().filter(|c| c.failed()).collect();
        assert_eq!(check_counter(&refs(&h), &failed, Some(3)), Ok(()));
    }

    #[test]
    fn a_success_applied_twice_leaves_a_gap_no_failed_call_explains() {
        // Value 1 was taken by nobody: the only failed call ended before
        // the call that took 0 began, so it cannot have taken 1.
        let h = vec![
            call(0, (0, 5), None, Outcome::Failed("x".into())),
            call(0, (10, 20), None, Outcome::Took(0)),
            call(0, (30, 40), None, Outcome::Took(2)),
        ];
        let failed: Vec<&Call> = h.iter().filter(|c| c.failed()).collect();
        let e = check_counter(&refs(&h), &failed, Some(3)).unwrap_err();
        assert!(e.contains("value 1 was taken, but by no call"), "{e}");
    }

    #[test]
    fn real_time_order_and_reads_are_checked() {
        let h = vec![
            call(0, (0, 10), None, Outcome::Took(1)),
            call(0, (20, 30), None, Outcome::Took(0)),
        ];
        let e = check_counter(&refs(&h), &[], Some(2)).unwrap_err();
        assert!(e.contains("returned before"), "{e}");
        let h = vec![
            call(0, (0, 10), None, Outcome::Took(0)),
            call(0, (20, 30), None, Outcome::Saw(0)),
            call(0, (40, 50), None, Outcome::Took(1)),
        ];
        let e = check_counter(&refs(&h), &[], Some(2)).unwrap_err();
        assert!(e.contains("read 0, but the counter held 1..=1"), "{e}");
    }

    #[test]
    fn a_swap_chain_is_followed_through_failed_swaps() {
        let h = vec![
            call(3, (0, 10), Some(10), Outcome::Swapped(0)),
            call(3, (20, 30), Some(20), Outcome::Failed("x".into())),
            call(3, (40, 50), Some(30), Outcome::Swapped(20)),
        ];
        assert_eq!(check_swaps(&refs(&h), 30), Ok(()));
        // Without the failed swap, the chain breaks at 10.
        let e = check_swaps(&refs(&[h[0].clone(), h[2].clone()]), 30).unwrap_err();
        assert!(e.contains("returned 20, which no call wrote"), "{e}");
        // A value returned twice.
        let h = vec![
            call(3, (0, 10), Some(10), Outcome::Swapped(0)),
            call(3, (20, 30), Some(20), Outcome::Swapped(0)),
        ];
        let e = check_swaps(&refs(&h), 20).unwrap_err();
        assert!(e.contains("returned twice"), "{e}");
    }
}
