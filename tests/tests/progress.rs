//! `--progress spin`: the same operations, busy-polled on both sides — and
//! a rank that went idle (backed off to sleeping) still answers.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use bytes::BytesMut;
use pld_proto::dtype::{from_bytes, to_bytes};
use pld_server::{Chunking, Dtype, Layout, Progress, Shape, Transfer, TransportKind};
use pld_tests::{Cluster, both, pattern};
use std::time::Duration;

const IDLE: Duration = Duration::from_millis(30);

async fn spinning(t: TransportKind, n: u32, daemons: &[u32]) -> Cluster {
    spinning_as(t, n, daemons, Progress::spin(IDLE)).await
}

/// Daemons spin (oversubscribed where this host has fewer cores than
/// ranks); embedded ranks with `progress`.
async fn spinning_as(t: TransportKind, n: u32, daemons: &[u32], progress: Progress) -> Cluster {
    Cluster::start_full(
        t,
        n,
        daemons,
        &["data=24MiB", "signal=64KiB"],
        &["--progress", "spin", "--spin-idle", "30ms"],
        |c| c.progress = progress,
    )
    .await
}

both!(
    spinning_ranks_move_every_size_and_region,
    180,
    |t: TransportKind| async move {
        let c = spinning(t, 3, &[2]).await;
        let (r, data) = (c.rank(0), c.window("data"));
        for (i, size) in [1usize, 8, 4096, 65_536, 1 << 20, (4 << 20) + 3, 8 << 20]
            .into_iter()
            .enumerate()
        {
            for target in [1, 2] {
                let bytes = pattern(size, i as u64 + 10 * target as u64);
                r.put(target, data, 5, &bytes).await.unwrap();
                assert_eq!(
                    &r.get(target, data, 5, size as u64).await.unwrap()[..],
                    &bytes[..],
                    "{size} B"
                );
                // Into a reused buffer, straight from the socket.
                let back = r
                    .get_nb_into(target, data, 5, BytesMut::zeroed(size))
                    .await
                    .unwrap()
                    .wait()
                    .await
                    .unwrap();
                assert_eq!(&back[..], &bytes[..]);
            }
        }
        // A strided region and atomic adds into it.
        let tr = Transfer {
            dtype: Dtype::Int32,
            shape: Shape {
                rows: 512,
                cols: 700,
            },
            dst: Layout {
                offset: 1 << 20,
                row_stride: 1024,
            },
            src: Layout {
                offset: 0,
                row_stride: 700,
            },
        };
        let ones = to_bytes(&vec![1i32; 512 * 700]);
        // Start from zero: the loop above left patterns in this part of the window.
        let zeros = vec![0u8; ones.len()];
        r.put_region(2, data, &tr, &zeros, Chunking::default())
            .await
            .unwrap();
        for _ in 0..3 {
            r.atomic_add_region(2, data, &tr, &ones, Chunking::pipelined(64, 700))
                .await
                .unwrap();
        }
        let mut out = vec![0u8; ones.len()];
        let back = Transfer {
            src: tr.dst,
            dst: tr.src,
            ..tr
        };
        r.get_region(2, data, &back, &mut out, Chunking::default())
            .await
            .unwrap();
        let sums = from_bytes::<i32>(&out);
        let wrong = sums.iter().filter(|v| **v != 3).count();
        assert_eq!(wrong, 0, "{wrong} of {} elements are not 3", sums.len());
        // fetch_add from both embedded ranks at once, on a zeroed cell.
        r.put(2, data, 0, &[0u8; 8]).await.unwrap();
        let (a, b) = tokio::join!(
            async {
                for _ in 0..500 {
                    c.rank(0)
                        .fetch_add(2, data, 0, Dtype::Int64, 1)
                        .await
                        .unwrap();
                }
            },
            async {
                for _ in 0..500 {
                    c.rank(1)
                        .fetch_add(2, data, 0, Dtype::Int64, 1)
                        .await
                        .unwrap();
                }
            },
        );
        let _ = (a, b);
        assert_eq!(
            from_bytes::<i64>(&r.get(2, data, 0, 8).await.unwrap()),
            vec![1000]
        );
    }
);

/// Three ranks put to their right-hand neighbour, barrier, and check what
/// their left-hand one put, 300 times: every barrier round and every put
/// under the spin policy the cluster runs.
async fn store_ring(c: Cluster) {
    let c = std::sync::Arc::new(c);
    let data = c.window("data");
    let tasks: Vec<_> = (0..3u32)
        .map(|me| {
            let c = c.clone();
            tokio::spawn(async move {
                let r = c.rank(me);
                for i in 0..300u64 {
                    let slot = (i % 2) * 8;
                    r.put(
                        (me + 1) % 3,
                        data,
                        slot,
                        &(i * 10 + me as u64).to_le_bytes(),
                    )
                    .await
                    .unwrap();
                    r.barrier().await.unwrap();
                    let got =
                        from_bytes::<i64>(&r.local(data).unwrap().read(slot, 8).unwrap())[0] as u64;
                    assert_eq!(
                        got,
                        i * 10 + ((me + 2) % 3) as u64,
                        "rank {me} iteration {i}"
                    );
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

both!(
    spinning_ranks_run_barriers_and_the_store_ring,
    120,
    |t: TransportKind| async move { store_ring(spinning(t, 3, &[]).await).await }
);

both!(
    oversubscribed_spinning_ranks_run_barriers_and_the_store_ring,
    120,
    |t: TransportKind| async move {
        let progress = Progress::Spin {
            idle: IDLE,
            oversubscribed: true,
        };
        store_ring(spinning_as(t, 3, &[], progress).await).await
    }
);

both!(
    a_rank_that_backed_off_to_sleeping_still_answers,
    60,
    |t: TransportKind| async move {
        let mut c = spinning(t, 2, &[1]).await;
        let data = c.window("data");
        c.rank(0).put(1, data, 0, b"warm").await.unwrap();
        // Idle past the spin idle time (30 ms), the daemon stops spinning:
        // over a second its threads are runnable a small share of the
        // time (a spinning thread is runnable throughout, however loaded
        // the machine: `Daemon::runnable_share`). Measured until it
        // holds, for a while at most.
        let settle = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let share = c.daemon(1).runnable_share(Duration::from_secs(1)).await;
            if share < 0.5 {
                break;
            }
            assert!(
                std::time::Instant::now() < settle,
                "the idle daemon's threads are still runnable {:.0} % of the time",
                share * 100.0
            );
        }
        let r = c.rank(0);
        r.put(1, data, 0, b"wake").await.unwrap();
        assert_eq!(&r.get(1, data, 0, 4).await.unwrap()[..], b"wake");
    }
);
