//! Atomics under faults, checked as a history. Clients of three kinds — an
//! embedded rank, Rust gRPC clients of two daemons — run fetch_add and
//! compare_swap on shared counters of a 4-rank cluster while one daemon
//! (a gRPC front that holds no counter) is killed and restarted and a
//! counter's rank is stalled (SIGSTOP) past the op timeout and resumed.
//! Every call's invocation, response or error is recorded, and the history
//! must be linearizable for a counter:
//!
//! - the values the successful calls returned are all different;
//! - a call that returned before another was invoked got the smaller one;
//! - a failed call was applied once or not at all: the counter ends
//!   between the successes and the successes plus the failures, and the
//!   values nobody returned are exactly as many as the failures applied.
//!
//! The counters live on ranks that are never restarted: a restarted rank's
//! windows start zeroed (docs/semantics.md), so its counters start again at
//! 0 — what the docs promise, and not a counter's history to check. The
//! Python client's history is checked the same way by
//! `client/python/tests/test_linearizable.py`. Seeded (`PLD_TEST_SEED`),
//! bounded in time and count; a failure prints the history.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_client::Client;
use pld_server::{Dtype, Rank, TransportKind};
use pld_tests::{Daemon, loopback_peers, rank_config, run};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The counters: (rank, byte offset) of int64 cells in window `data`.
const CELLS: [(u32, u64); 2] = [(1, 0), (2, 64)];
const CALLS_EACH: usize = 400;

/// One call of the history.
#[derive(Debug, Clone)]
// `client` and `kind` are read only in the printed history.
#[allow(dead_code)]
struct Call {
    client: String,
    cell: usize,
    kind: &'static str,
    invoked: Instant,
    returned: Instant,
    /// The value the call claimed (fetch_add's previous value; a
    /// compare_swap's expected value, if it swapped), or why it failed;
    /// `None` for a compare_swap that found another value (it changed
    /// nothing).
    outcome: Result<Option<i64>, String>,
}

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

/// What a client does: fetch_add 1, or compare_swap from the value it
/// last saw to one more.
#[derive(Clone, Copy)]
enum Op {
    FetchAdd,
    CompareSwap(i64),
}

/// Runs `CALLS_EACH` ops of client `name` through `call`, recording them.
async fn client<F, Fut>(name: String, seed: u64, history: History, call: F)
where
    F: Fn(usize, Op) -> Fut,
    Fut: std::future::Future<Output = Result<i64, String>>,
{
    let mut rng = Rng(seed | 1);
    let mut seen = [0i64; CELLS.len()];
    for _ in 0..CALLS_EACH {
        let cell = rng.below(CELLS.len() as u64) as usize;
        let op = if rng.below(3) == 0 {
            Op::CompareSwap(seen[cell])
        } else {
            Op::FetchAdd
        };
        let invoked = Instant::now();
        let got = call(cell, op).await;
        let returned = Instant::now();
        let (kind, outcome) = match (op, got) {
            (Op::FetchAdd, Ok(v)) => {
                seen[cell] = v + 1;
                ("fetch_add", Ok(Some(v)))
            }
            (Op::CompareSwap(e), Ok(v)) => {
                seen[cell] = if v == e { v + 1 } else { v };
                ("compare_swap", Ok((v == e).then_some(e)))
            }
            (Op::FetchAdd, Err(e)) => ("fetch_add", Err(e)),
            (Op::CompareSwap(_), Err(e)) => ("compare_swap", Err(e)),
        };
        history.lock().unwrap().push(Call {
            client: name.clone(),
            cell,
            kind,
            invoked,
            returned,
            outcome,
        });
    }
}

/// The first rule the history of `cell`, which ended at `last`, breaks.
fn check(calls: &[Call], cell: usize, last: i64) -> Result<(), String> {
    let mine: Vec<&Call> = calls.iter().filter(|c| c.cell == cell).collect();
    let mut claimed: Vec<(i64, &Call)> = mine
        .iter()
        .filter_map(|c| match c.outcome {
            Ok(Some(v)) => Some((v, *c)),
            _ => None,
        })
        .collect();
    // A failed fetch_add may have added; a failed compare_swap may have
    // swapped (and then claimed a value too).
    let failed = mine.iter().filter(|c| c.outcome.is_err()).count() as i64;
    claimed.sort_by_key(|(v, _)| *v);
    for w in claimed.windows(2) {
        if w[0].0 == w[1].0 {
            return Err(format!(
                "value {} returned twice: {:?} and {:?}",
                w[0].0, w[0].1, w[1].1
            ));
        }
    }
    for (v, c) in &claimed {
        if *v < 0 || *v >= last {
            return Err(format!("{c:?} claimed {v}, outside 0..{last}"));
        }
    }
    let succeeded = claimed.len() as i64;
    if last < succeeded || last > succeeded + failed {
        return Err(format!(
            "the counter ended at {last}: {succeeded} claims succeeded and {failed} calls failed"
        ));
    }
    // Real-time order: a claim that returned before another was invoked
    // holds the smaller value.
    for (va, a) in &claimed {
        for (vb, b) in &claimed {
            if a.returned < b.invoked && va > vb {
                return Err(format!(
                    "{a:?} returned before {b:?} was invoked, with a larger value"
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn fetch_add_and_compare_swap_stay_linearizable_while_ranks_die_and_stall() {
    run(Duration::from_secs(240), async {
        let seed: u64 = std::env::var("PLD_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5eed);
        let t = TransportKind::Tcp;
        let peers = loopback_peers(4);
        let grpc = loopback_peers(4);
        let op_timeout = "2s";
        let args = |r: usize| -> Vec<String> {
            [
                "--grpc",
                grpc[r].as_str(),
                "--op-timeout",
                op_timeout,
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
        let data = rank.window("data").unwrap();
        let mut clients = tokio::task::JoinSet::new();
        // The embedded rank.
        {
            let (rank, h) = (rank.clone(), history.clone());
            clients.spawn(client(
                "embedded rank 0".into(),
                seed,
                h,
                move |cell, op| {
                    let rank = rank.clone();
                    async move {
                        let (r, at) = CELLS[cell];
                        match op {
                            Op::FetchAdd => rank.fetch_add(r, data, at, Dtype::Int64, 1).await,
                            Op::CompareSwap(e) => {
                                rank.compare_swap(r, data, at, Dtype::Int64, e, e + 1).await
                            }
                        }
                        .map_err(|e| e.to_string())
                    }
                },
            ));
        }
        // Rust gRPC clients of rank 3 (killed and restarted) and rank 1.
        for (i, front) in [3usize, 3, 1].into_iter().enumerate() {
            let cl = Client::connect(&grpc[front]).await.unwrap();
            let h = history.clone();
            let name = format!("gRPC client {i} of rank {front}");
            clients.spawn(client(name, seed + 1 + i as u64, h, move |cell, op| {
                let cl = cl.clone();
                async move {
                    let (r, at) = CELLS[cell];
                    let data = cl.window("data").map_err(|e| e.to_string())?;
                    match op {
                        Op::FetchAdd => cl.fetch_add(r, data, at, Dtype::Int64, 1).await,
                        Op::CompareSwap(e) => {
                            cl.compare_swap(r, data, at, Dtype::Int64, e, e + 1).await
                        }
                    }
                    .map_err(|e| e.to_string())
                }
            }));
        }
        // The faults, while the clients run: rank 3 killed and restarted;
        // rank 2 (a counter's) stalled past the op timeout and resumed.
        let wait_calls = |n: usize| {
            let h = history.clone();
            async move {
                while h.lock().unwrap().len() < n {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        wait_calls(200).await;
        daemons[2].kill();
        wait_calls(400).await;
        daemons[2] = spawn(3);
        daemons[2].wait_ready(Duration::from_secs(30));
        wait_calls(600).await;
        daemons[1].pause();
        // The stall lasts past the op timeout (2 s): calls to rank 2 fail,
        // and it applies them when it resumes.
        tokio::time::sleep(Duration::from_secs(3)).await;
        daemons[1].resume();
        while let Some(j) = clients.join_next().await {
            j.unwrap();
        }
        // Every call has returned; the last values, read once all is quiet.
        let calls = history.lock().unwrap().clone();
        let mut failures = Vec::new();
        for (cell, (r, at)) in CELLS.iter().enumerate() {
            let bytes = rank.get(*r, data, *at, 8).await.unwrap();
            let last = i64::from_le_bytes(bytes[..8].try_into().unwrap());
            if let Err(e) = check(&calls, cell, last) {
                failures.push(format!("cell {cell} (rank {r}): {e}"));
            }
        }
        let failed = calls.iter().filter(|c| c.outcome.is_err()).count();
        assert!(failed > 0, "the faults failed no call: they did not happen");
        if !failures.is_empty() {
            for c in &calls {
                println!("{c:?}");
            }
            panic!("seed {seed}: the history is not linearizable: {failures:?}");
        }
    });
}
