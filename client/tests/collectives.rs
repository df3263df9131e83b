//! The collectives over gRPC: every rank's program calls the same
//! collective through its own daemon, and the daemons run it among
//! themselves over the peer plane.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_client::{Algo, Client, Code, Error, ReduceOp};
use pld_tests::{GrpcCluster, run};
use std::time::Duration;
use tokio::task::JoinSet;

async fn clients(c: &GrpcCluster) -> Vec<Client> {
    let mut out = Vec::new();
    for a in &c.grpc {
        out.push(Client::connect(a).await.expect("connect"));
    }
    out
}

fn x(rank: u32, n: usize) -> Vec<i32> {
    (0..n).map(|i| (rank as i32 + 1) * 100 + i as i32).collect()
}

#[test]
fn collectives_through_three_daemons_agree_with_their_definitions() {
    run(Duration::from_secs(120), async {
        let c = GrpcCluster::start(
            pld_server::TransportKind::Quic,
            3,
            &[
                "--window",
                "data=1MiB",
                "--window",
                "signal=64KiB",
                "--window",
                "collective=1MiB",
            ],
        );
        let cls = clients(&c).await;
        let before = sent(&cls[0]).await;
        let mut set = JoinSet::new();
        for cl in &cls {
            let cl = cl.clone();
            set.spawn(async move {
                let me = cl.rank();
                let mine = x(me, 6);
                let sum_ring = cl
                    .all_reduce(&mine, ReduceOp::Sum, Algo::Ring)
                    .await
                    .unwrap();
                let max_mesh = cl
                    .all_reduce(&mine, ReduceOp::Max, Algo::Mesh)
                    .await
                    .unwrap();
                let halves: Vec<half::bf16> = mine
                    .iter()
                    .map(|v| half::bf16::from_f32(*v as f32 / 2.0))
                    .collect();
                let bf = cl
                    .all_reduce(&halves, ReduceOp::Sum, Algo::Ring)
                    .await
                    .unwrap();
                let b = cl.broadcast(&mine, 2).await.unwrap();
                let g = cl.all_gather(&mine).await.unwrap();
                let rs = cl.reduce_scatter(&mine, ReduceOp::Min).await.unwrap();
                let a2a = cl.all_to_all(&mine).await.unwrap();
                (me, sum_ring, max_mesh, bf, b, g, rs, a2a)
            });
        }
        let all: Vec<Vec<i32>> = (0..3).map(|r| x(r, 6)).collect();
        let fold = |f: fn(i32, i32) -> i32| -> Vec<i32> {
            (0..6)
                .map(|i| f(f(all[0][i], all[1][i]), all[2][i]))
                .collect()
        };
        while let Some(j) = set.join_next().await {
            let (me, sum, max, bf, b, g, rs, a2a) = j.unwrap();
            assert_eq!(sum, fold(|a, b| a + b), "rank {me}");
            assert_eq!(max, fold(i32::max));
            let bf: Vec<f32> = bf.iter().map(|v| v.to_f32()).collect();
            let want: Vec<f32> = fold(|a, b| a + b).iter().map(|v| *v as f32 / 2.0).collect();
            for (g, w) in bf.iter().zip(&want) {
                assert!((g - w).abs() <= w.abs() / 128.0, "bf16 {g} vs {w}");
            }
            assert_eq!(b, all[2]);
            assert_eq!(g, all.concat());
            let m = me as usize;
            assert_eq!(rs, fold(i32::min)[2 * m..2 * m + 2].to_vec());
            let want: Vec<i32> = (0..3)
                .flat_map(|s| all[s][2 * m..2 * m + 2].to_vec())
                .collect();
            assert_eq!(a2a, want);
        }
        // Rank 0 sent the documented messages (docs/client.md): each call
        // agrees first (a put of its call to each other rank, a barrier),
        // then runs its algorithm. Barriers: 2 ring allreduces x (1 + 2(P -
        // 1) + 1) + 5 others x (1 + 2) = 27, each 2 signals at P = 3. Puts
        // to other ranks: 7 x 2 to agree, ring 2 x 2(P - 1), mesh,
        // allgather, reduce_scatter and all_to_all 2 each, broadcast none
        // (rank 2 is the root).
        let after = sent(&cls[0]).await;
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            (54, 30),
            "(barrier signals, puts) rank 0 sent"
        );
    });
}

/// The barrier signals and puts rank `cl`'s daemon has sent.
async fn sent(cl: &Client) -> (u64, u64) {
    let stats = cl.stats().await.unwrap();
    let count = |kind: &str| {
        stats
            .counters
            .iter()
            .find(|c| c.name == "msgs_sent" && c.kind == kind)
            .map_or(0, |c| c.value)
    };
    (count("barrier"), count("put"))
}

fn code(e: Error) -> (Code, String) {
    (e.code(), e.to_string())
}

#[test]
fn collectives_refuse_what_they_cannot_do_with_the_fix() {
    run(Duration::from_secs(120), async {
        // No collective window.
        let c = GrpcCluster::start(
            pld_server::TransportKind::Tcp,
            2,
            &["--window", "data=1MiB", "--window", "signal=64KiB"],
        );
        let cls = clients(&c).await;
        let (k, msg) = code(cls[0].all_gather(&[1i32, 2]).await.unwrap_err());
        assert_eq!(k, Code::FailedPrecondition, "{msg}");
        assert!(msg.contains("--window collective=SIZE"), "{msg}");
        drop(cls);
        drop(c);

        // A scratch too small, a ragged all_to_all, a bad root: refused on
        // every rank alike, before anything moves.
        let c = GrpcCluster::start(
            pld_server::TransportKind::Tcp,
            2,
            &[
                "--window",
                "data=1MiB",
                "--window",
                "signal=64KiB",
                "--window",
                "collective=4KiB",
            ],
        );
        let cls = clients(&c).await;
        let big = vec![1.0f32; 1024];
        let (k, msg) = code(cls[0].all_gather(&big).await.unwrap_err());
        assert_eq!(k, Code::ResourceExhausted, "{msg}");
        assert!(
            msg.contains("8192 bytes of scratch") && msg.contains("larger --window collective"),
            "{msg}"
        );
        let (k, msg) = code(cls[1].all_to_all(&[1i32, 2, 3]).await.unwrap_err());
        assert_eq!(k, Code::InvalidArgument, "{msg}");
        assert!(
            msg.contains("3 elements do not split into 2 equal blocks"),
            "{msg}"
        );
        let (k, msg) = code(cls[0].broadcast(&[1i32], 5).await.unwrap_err());
        assert_eq!(k, Code::InvalidArgument, "{msg}");
        assert!(msg.contains("root 5 is not a rank"), "{msg}");

        // And the daemons still run collectives afterwards.
        let (a, b) = tokio::join!(
            cls[0].all_reduce(&[1i64, 2], ReduceOp::Prod, Algo::Mesh),
            cls[1].all_reduce(&[3i64, 4], ReduceOp::Prod, Algo::Mesh)
        );
        assert_eq!(a.unwrap(), vec![3, 8]);
        assert_eq!(b.unwrap(), vec![3, 8]);
    });
}
