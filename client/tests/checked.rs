//! Checked mode on daemons, through the client plane: `--checked=strict`
//! refuses racing accesses with FAILED_PRECONDITION and the race named,
//! whoever makes them, and the race detector's memory stays within its
//! documented budget whatever the access pattern, forgetting what barriers
//! order.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use pld_client::{Client, Code};
use pld_proto::v1::{
    BarrierRequest, BatchOp, BatchRequest, PutRequest, StatsRequest, batch_op::Op,
};
use pld_server::TransportKind;
use pld_tests::{GrpcCluster, run};
use std::time::Duration;

fn reason(e: &pld_client::Error) -> String {
    e.detail().map(|d| d.reason.clone()).unwrap_or_default()
}

// On the landed build a rank's own racing access came back INVALID_ARGUMENT
// (docs: FAILED_PRECONDITION), and its repeat named "window 1", not 'data'.
#[test]
fn strict_mode_refuses_racing_accesses_through_grpc_as_failed_preconditions() {
    run(Duration::from_secs(60), async {
        let c = GrpcCluster::start(TransportKind::Tcp, 2, &["--checked=strict"]);
        let c0 = Client::connect(&c.grpc[0]).await.unwrap();
        let c1 = Client::connect(&c.grpc[1]).await.unwrap();
        let data = c0.window("data").unwrap();
        // Rank 0 puts into rank 1; rank 1 then reads its own bytes with
        // nothing ordering the two: its own load is refused.
        c0.put(1, data, 0, &[7u8; 8]).await.unwrap();
        for first in [true, false] {
            let e = c1.get(1, data, 0, 8).await.unwrap_err();
            assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
            assert_eq!(reason(&e), "RACE", "{e}");
            assert!(
                e.to_string()
                    .contains("race on rank 1's window 'data' bytes 0..8"),
                "{e}"
            );
            if first {
                assert!(e.to_string().contains("rank 0 put into"), "{e}");
            }
        }
        // A peer's racing get is refused at its target, the same way.
        c0.put(0, data, 64, &[1u8; 8]).await.unwrap();
        let e = c1.get(0, data, 64, 8).await.unwrap_err();
        assert_eq!(e.code(), Code::FailedPrecondition, "{e}");
        assert_eq!(reason(&e), "REJECTED", "{e}");
        assert!(e.to_string().contains("stored into its own"), "{e}");
        // Ordered by a barrier, both pass.
        let (a, b) = tokio::join!(c0.barrier(), c1.barrier());
        a.unwrap();
        b.unwrap();
        assert_eq!(&c1.get(1, data, 0, 8).await.unwrap()[..], &[7u8; 8]);
        assert_eq!(&c1.get(0, data, 64, 8).await.unwrap()[..], &[1u8; 8]);
    });
}

/// Rank 1's checked-mode counters: ranges kept, ranges forgotten.
async fn shadow(addr: &str) -> (u64, u64) {
    let mut raw = common::raw(addr).await;
    let s = raw.stats(StatsRequest {}).await.unwrap().into_inner();
    let get = |n: &str| {
        s.counters
            .iter()
            .find(|c| c.name == n)
            .map_or_else(|| panic!("no counter {n}"), |c| c.value)
    };
    (get("checked_ranges"), get("checked_forgotten"))
}

async fn barrier_on_both(c: &GrpcCluster) {
    let (mut a, mut b) = (common::raw(&c.grpc[0]).await, common::raw(&c.grpc[1]).await);
    let req = || BarrierRequest { timeout_ms: 30_000 };
    let (x, y) = tokio::join!(a.barrier(req()), b.barrier(req()));
    x.unwrap();
    y.unwrap();
}

// On the landed build 24 such batches took the target from 8.8 MB to
// 622 MB (~400 B a range), and it never came back down.
#[test]
fn the_race_detector_stays_within_its_budget_and_forgets_what_barriers_order() {
    run(Duration::from_secs(300), async {
        let mut c = GrpcCluster::start(TransportKind::Tcp, 2, &["--checked"]);
        let mut raw = common::raw(&c.grpc[0]).await;
        let rss0 = c.daemon(1).memory().unwrap();
        // 8 batches of 65 536 one-byte puts to distinct bytes of rank 1:
        // 524 288 ranges unless the shadow forgets.
        for b in 0..8u64 {
            let ops = (0..65_536u64)
                .map(|i| BatchOp {
                    op: Some(Op::Put(PutRequest {
                        rank: 1,
                        window: "data".into(),
                        offset: b * 131_072 + 2 * i,
                        data: vec![1u8].into(),
                        region: None,
                    })),
                })
                .collect();
            let r = raw.batch(BatchRequest { ops }).await.unwrap().into_inner();
            assert!(r.results.iter().all(|x| x.code == 0));
        }
        let grown = c.daemon(1).memory().unwrap().saturating_sub(rss0);
        assert!(grown < 48 << 20, "RSS grew {} MiB", grown >> 20);
        let (ranges, forgotten) = shadow(&c.grpc[1]).await;
        // The budget is 65 536 ranges a window (docs/checked.md).
        assert!(ranges <= 65_536, "{ranges} ranges kept");
        assert!(forgotten >= 524_288 - 65_536, "{forgotten} forgotten");
        // The second barrier orders everything before the first: forgotten.
        barrier_on_both(&c).await;
        barrier_on_both(&c).await;
        assert_eq!(shadow(&c.grpc[1]).await.0, 0, "ranges after two barriers");
        // An overwrite of the whole area, ordered: one range.
        let cl = Client::connect(&c.grpc[0]).await.unwrap();
        let data = cl.window("data").unwrap();
        cl.put(1, data, 0, &vec![2u8; 1 << 20]).await.unwrap();
        // (One range a frame of the put: each has its own op id.)
        assert!(shadow(&c.grpc[1]).await.0 <= 64);
        let grown = c.daemon(1).memory().unwrap().saturating_sub(rss0);
        assert!(grown < 48 << 20, "RSS grew {} MiB", grown >> 20);
        let log = c.daemon(1).kill_and_stderr_now();
        let warned = log.matches("holds its budget of 65536 ranges").count();
        assert_eq!(warned, 1, "the budget is reported once:\n{log}");
    });
}
