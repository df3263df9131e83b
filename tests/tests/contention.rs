//! Atomicity under contention: many ranks, many ops in flight, the same
//! cells. The cells live in a `pld-daemon`, so every update crosses a real
//! socket and another process applies it.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::dtype::{from_bytes, to_bytes};
use pld_server::{Dtype, Rank, TransportKind, WindowId};
use pld_tests::{Cluster, both};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The four adders are embedded ranks 0..4; rank 4 is the daemon that holds
/// the cells.
const ADDERS: u32 = 4;
const HOLDER: u32 = 4;
const OPS: usize = 10_000;
const IN_FLIGHT: usize = 128;

async fn cluster(t: TransportKind) -> Arc<Cluster> {
    Arc::new(Cluster::start(t, ADDERS + 1, &[HOLDER]).await)
}

/// Runs `f(rank)` on every adder at once.
async fn on_every_adder<F, Fut, T>(c: &Arc<Cluster>, f: F) -> Vec<T>
where
    F: Fn(Arc<Cluster>, u32) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let tasks: Vec<_> = (0..ADDERS).map(|r| tokio::spawn(f(c.clone(), r))).collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("adder task"));
    }
    out
}

/// Issues `OPS` adds of `operand` with up to `IN_FLIGHT` outstanding.
async fn add_many(r: &Rank, target: u32, data: WindowId, offset: u64, operand: &[u8]) {
    let mut handles = std::collections::VecDeque::new();
    for _ in 0..OPS {
        if handles.len() == IN_FLIGHT {
            let h: pld_server::OpHandle<()> = handles.pop_front().expect("handle");
            h.wait().await.expect("add");
        }
        handles.push_back(
            r.atomic_add_nb(target, data, offset, Dtype::Int32, operand)
                .await
                .expect("issue"),
        );
    }
    for h in handles {
        h.wait().await.expect("add");
    }
}

both!(
    four_ranks_adding_10000_times_to_16_cells_lose_no_update,
    300,
    |t: TransportKind| async move {
        let c = cluster(t).await;
        let data = c.window("data");
        // Cell i gets i + 1 per add, so a lost or doubled add shows in every cell.
        let operand = to_bytes(&(1..=16).collect::<Vec<i32>>());
        on_every_adder(&c, |c, r| {
            let operand = operand.clone();
            async move {
                let rank = c.rank(r);
                // Into the daemon's cells and into rank 0's, where rank 0's own
                // local adds race the remote ones.
                add_many(rank, HOLDER, data, 1024, &operand).await;
                add_many(rank, 0, data, 2048, &operand).await;
            }
        })
        .await;
        let want: Vec<i32> = (1..=16).map(|i| i * (ADDERS as i32) * OPS as i32).collect();
        for (holder, offset) in [(HOLDER, 1024), (0, 2048)] {
            let got = from_bytes::<i32>(&c.rank(1).get(holder, data, offset, 64).await.unwrap());
            assert_eq!(got, want, "cells at rank {holder}");
        }
    }
);

both!(
    fetch_add_hands_out_each_value_exactly_once,
    300,
    |t: TransportKind| async move {
        let c = cluster(t).await;
        let data = c.window("data");
        for (dtype, offset) in [(Dtype::Int64, 4096u64), (Dtype::Int32, 4104)] {
            let per_rank = OPS / 4;
            let got = on_every_adder(&c, move |c, r| async move {
                let rank = c.rank(r);
                let mut values = Vec::with_capacity(per_rank);
                let mut handles = std::collections::VecDeque::new();
                for _ in 0..per_rank {
                    if handles.len() == IN_FLIGHT {
                        let h: pld_server::OpHandle<i64> = handles.pop_front().expect("handle");
                        values.push(h.wait().await.expect("fetch_add"));
                    }
                    handles.push_back(
                        rank.fetch_add_nb(HOLDER, data, offset, dtype, 1)
                            .await
                            .expect("issue"),
                    );
                }
                for h in handles {
                    values.push(h.wait().await.expect("fetch_add"));
                }
                values
            })
            .await;
            let all: Vec<i64> = got.into_iter().flatten().collect();
            let set: BTreeSet<i64> = all.iter().copied().collect();
            assert_eq!(all.len(), ADDERS as usize * per_rank);
            assert_eq!(
                set.len(),
                all.len(),
                "{dtype}: a value was handed out twice"
            );
            assert_eq!(set.first(), Some(&0));
            assert_eq!(
                set.last(),
                Some(&(all.len() as i64 - 1)),
                "{dtype}: the values are 0..n"
            );
        }
    }
);

both!(
    compare_swap_hands_out_each_value_exactly_once,
    300,
    |t: TransportKind| async move {
        let c = cluster(t).await;
        let data = c.window("data");
        const TOTAL: i64 = 2_000;
        for (dtype, offset) in [(Dtype::Int64, 8192u64), (Dtype::Int32, 8200)] {
            let got = on_every_adder(&c, move |c, r| async move {
                let rank = c.rank(r);
                let mut claimed = Vec::new();
                let mut guess = 0;
                // The classic CAS loop: claim `guess` by moving the cell to guess+1.
                while guess < TOTAL {
                    let prev = rank
                        .compare_swap(HOLDER, data, offset, dtype, guess, guess + 1)
                        .await
                        .expect("compare_swap");
                    if prev == guess {
                        claimed.push(guess);
                        guess += 1;
                    } else {
                        guess = prev;
                    }
                }
                claimed
            })
            .await;
            let all: Vec<i64> = got.into_iter().flatten().collect();
            let set: BTreeSet<i64> = all.iter().copied().collect();
            assert_eq!(set.len(), all.len(), "{dtype}: a value was claimed twice");
            assert_eq!(
                set,
                (0..TOTAL).collect(),
                "{dtype}: every value claimed once"
            );
            let cell = c
                .rank(0)
                .get(HOLDER, data, offset, dtype.size() as u64)
                .await
                .unwrap();
            let v = if dtype == Dtype::Int64 {
                from_bytes::<i64>(&cell)[0]
            } else {
                from_bytes::<i32>(&cell)[0] as i64
            };
            assert_eq!(v, TOTAL);
        }
    }
);
