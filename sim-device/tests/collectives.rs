//! The collectives through the caller's signal, against real in-process
//! ranks: each agrees with its definition, sends the messages its header
//! documents, reuses its signal, and names every misuse before anything
//! is sent.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_proto::MsgKind;
use pld_server::{Rank, TransportKind};
use pld_sim::launch::{self, Args, Check, Program};
use pld_sim::{
    Algo, Cmp, Device, DistributedTensor, NotifyOp, Profile, ReduceOp, Result, Rma, Tensor,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

const WINDOWS: [(&str, u64); 2] = [("data", 1 << 20), ("signal", 64 << 10)];

async fn devices(n: u32, sync: Duration) -> Vec<Arc<Device<Rank>>> {
    let windows: Vec<(String, u64)> = WINDOWS.iter().map(|(n, s)| (n.to_string(), *s)).collect();
    launch::start_ranks(n, TransportKind::Quic, &windows, sync)
        .await
        .expect("ranks start")
        .into_iter()
        .map(|r| Arc::new(Device::new(Arc::new(r), Profile::A2a3sim, windows.clone())))
        .collect()
}

fn run(body: impl Future<Output = ()>) {
    pld_tests::run(Duration::from_secs(120), body);
}

/// (notifies, puts, gets) sent by all ranks so far.
fn traffic(devs: &[Arc<Device<Rank>>]) -> [u64; 3] {
    let mut t = [0; 3];
    for d in devs {
        let s = d.rma().stats();
        t[0] += s.msgs_sent(MsgKind::Notify);
        t[1] += s.msgs_sent(MsgKind::Put);
        t[2] += s.msgs_sent(MsgKind::Get);
    }
    t
}

/// Runs `f(device)` on every rank at once; returns the results by rank.
async fn on_all<T, F, Fut>(devs: &[Arc<Device<Rank>>], f: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Arc<Device<Rank>>) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
{
    let handles: Vec<_> = devs.iter().map(|d| tokio::spawn(f(d.clone()))).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

fn log2_ceil(p: u64) -> u64 {
    u64::from(p.next_power_of_two().trailing_zeros())
}

#[test]
fn the_builtin_barrier_sends_p_log_p_notifies_and_its_signal_is_reusable() {
    run(async {
        for p in [3u32, 4] {
            let devs = devices(p, Duration::from_secs(20)).await;
            let sigs: Vec<_> = devs
                .iter()
                .map(|d| d.alloc::<i32>("sig", "signal", [u64::from(p), 1]).unwrap())
                .collect();
            let before = traffic(&devs);
            let sigs2 = sigs.clone();
            on_all(&devs, move |d| {
                let s = sigs2[d.rank() as usize].clone();
                async move {
                    for _ in 0..3 {
                        d.barrier(&s).await.unwrap();
                    }
                }
            })
            .await;
            let after = traffic(&devs);
            let p64 = u64::from(p);
            assert_eq!(
                [
                    after[0] - before[0],
                    after[1] - before[1],
                    after[2] - before[2]
                ],
                [3 * p64 * log2_ceil(p64), 0, 0],
                "three barriers at P = {p}"
            );
            // Self-clearing: every cell is back at zero.
            for (d, s) in devs.iter().zip(&sigs) {
                assert!(d.read_own(s).await.unwrap().data().iter().all(|v| *v == 0));
            }
        }
    });
}

/// Every collective at P = 3, twice on the same signals: the results
/// against their definitions and the messages against the documented
/// counts.
#[test]
fn collectives_agree_with_their_definitions_and_send_the_documented_messages() {
    run(async {
        const P: u64 = 3;
        let devs = devices(P as u32, Duration::from_secs(20)).await;
        let xs: Vec<Tensor<i32>> = (0..P as u32)
            .map(|r| launch::input("x", r, [3, 5]))
            .collect();
        let fold = |op: ReduceOp, i: usize| -> i32 {
            let v = [xs[0].data()[i], xs[1].data()[i], xs[2].data()[i]];
            match op {
                ReduceOp::Max => *v.iter().max().unwrap(),
                ReduceOp::Min => *v.iter().min().unwrap(),
                ReduceOp::Prod => v[0].wrapping_mul(v[1]).wrapping_mul(v[2]),
                ReduceOp::Sum => v[0].wrapping_add(v[1]).wrapping_add(v[2]),
            }
        };
        let l = log2_ceil(P);
        type Case = (&'static str, [u64; 3]);
        let cases: [Case; 7] = [
            ("allreduce mesh", [2 * P * l, 0, P * (P - 1)]),
            ("allreduce ring", [2 * P * P, 0, 2 * P * (P - 1)]),
            ("broadcast", [2 * (P - 1), 0, P - 1]),
            ("allgather", [P * l, P * (P - 1), 0]),
            ("reduce_scatter", [2 * P * l, 0, P * (P - 1)]),
            ("all_to_all", [P * l, P * (P - 1), 0]),
            ("barrier", [P * l, 0, 0]),
        ];
        // One mesh and one ring signal per rank, reused by every call.
        let sigs: Vec<_> = devs
            .iter()
            .map(|d| {
                let mesh = d.alloc::<i32>("mesh signal", "signal", [3, 1]).unwrap();
                (
                    mesh,
                    d.alloc::<i32>("ring signal", "signal", [4, 3]).unwrap(),
                )
            })
            .collect();
        for (name, want) in cases {
            for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod] {
                let before = traffic(&devs);
                let sigs = sigs.clone();
                let results = on_all(&devs, move |d| {
                    let (mesh, ring) = sigs[d.rank() as usize].clone();
                    async move {
                        let me = d.rank();
                        let x = launch::input::<i32>("x", me, [3, 5]);
                        let (t, wide) = views(&d, name, op);
                        // The pulled collectives read what each rank staged;
                        // the pushed ones (allgather, all_to_all) write into
                        // fresh, zeroed targets that nobody else writes.
                        if !matches!(name, "allgather" | "all_to_all") {
                            d.put(&t, me, &x, Default::default()).await.unwrap();
                        }
                        match name {
                            "allreduce mesh" => d.allreduce(&t, &mesh, op, Algo::Mesh).await,
                            "allreduce ring" => d.allreduce(&t, &ring, op, Algo::Ring).await,
                            "broadcast" => d.broadcast(&t, &mesh, 1).await,
                            "allgather" => d.allgather(&x, &wide, &mesh).await,
                            "reduce_scatter" => d.reduce_scatter(&t, &mesh, op).await,
                            "all_to_all" => d.all_to_all(&x, &t, &mesh).await,
                            _ => d.barrier(&mesh).await,
                        }
                        .unwrap();
                        let view = if name == "allgather" { &wide } else { &t };
                        (me, d.read_own(view).await.unwrap().data().to_vec())
                    }
                })
                .await;
                let after = traffic(&devs);
                let sent = [
                    after[0] - before[0],
                    after[1] - before[1],
                    after[2] - before[2],
                ];
                assert_eq!(sent, want, "{name} ({op:?}): (notifies, puts, gets)");
                for (me, got) in results {
                    let m = me as usize;
                    let want: Vec<i32> = match name {
                        "allreduce mesh" | "allreduce ring" => {
                            (0..15).map(|i| fold(op, i)).collect()
                        }
                        "broadcast" => xs[1].data().to_vec(),
                        "allgather" => xs.iter().flat_map(|x| x.data().to_vec()).collect(),
                        "reduce_scatter" => (0..15)
                            .map(|i| {
                                if i / 5 == m {
                                    fold(op, i)
                                } else {
                                    xs[m].data()[i]
                                }
                            })
                            .collect(),
                        "all_to_all" => (0..15).map(|i| xs[i / 5].data()[m * 5 + i % 5]).collect(),
                        _ => xs[m].data().to_vec(),
                    };
                    assert_eq!(got, want, "{name} ({op:?}) on rank {me}");
                }
            }
        }
    });
}

/// The data views one collective case uses (fresh, zeroed; allocation is
/// symmetric, so every rank's call k gets the same offsets).
fn views(
    d: &Device<Rank>,
    name: &str,
    op: ReduceOp,
) -> (DistributedTensor<i32>, DistributedTensor<i32>) {
    let tag = format!("{name} {op:?}");
    let t = d.alloc::<i32>(&format!("t {tag}"), "data", [3, 5]).unwrap();
    let wide = d
        .alloc::<i32>(&format!("wide {tag}"), "data", [9, 5])
        .unwrap();
    (t, wide)
}

#[test]
fn signal_misuse_and_bad_peers_are_named_before_anything_is_sent() {
    run(async {
        let devs = devices(2, Duration::from_secs(2)).await;
        let d = &devs[0];
        let t = d.alloc::<f32>("t", "data", [1, 64]).unwrap();
        let flat = d.alloc::<i32>("flat", "signal", [1, 8]).unwrap();
        let mesh = d.alloc::<i32>("mesh", "signal", [2, 1]).unwrap();
        let before = traffic(&devs);
        let msg = |r: Result<()>| r.unwrap_err().to_string();
        let e = msg(d.barrier(&flat).await);
        assert!(
            e.contains("barrier: the signal 'flat' is [1, 8], but barrier needs at least [2, 1] int32 cells (one row per rank); allocate it as alloc_window_buffer([2, 1], int32)"),
            "{e}"
        );
        let e = msg(d.allreduce(&t, &mesh, ReduceOp::Sum, Algo::Ring).await);
        assert!(
            e.contains("needs at least [2, 2] int32 cells (ring: one row per round"),
            "{e}"
        );
        let e = msg(d.broadcast(&t, &mesh, 2).await);
        assert!(
            e.contains("broadcast: peer 2 is not a rank: the ranks are 0 to 1"),
            "{e}"
        );
        let e = msg(d.notify(&mesh, 2, [0, 0], 1, NotifyOp::Set).await);
        assert!(e.contains("notify: peer 2 is not a rank"), "{e}");
        // An unsigned `0 - 1` wrapped: named, not sent to rank 1 by a `%`.
        let wrapped = 0u32.wrapping_sub(1);
        let e = d
            .remote_load(&t, wrapped, [0, 0], [1, 64], None)
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("peer 4294967295 is not a rank"),
            "{e}"
        );
        assert_eq!((d.peer_prev(1), d.peer_next(1), d.peer_next(-3)), (1, 1, 1));
        let e = d.peer("remote_load", -1).unwrap_err().to_string();
        assert!(
            e.contains("peer -1 is not a rank") && e.contains("peer_prev"),
            "{e}"
        );
        // tensor remote_store: rows are 32-byte aligned, as on chip.
        let odd = Tensor::<f32>::zeros("odd", [1, 3]);
        let e = d
            .tensor_remote_store(&odd, &t, 1, [0, 0], Default::default())
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("rows of 12 bytes") && e.to_string().contains("multiple of 8"),
            "{e}"
        );
        // defer_wait accepts Ge only.
        let e = d
            .defer_wait(&mesh, [0, 0], 1, Cmp::Eq)
            .unwrap_err()
            .to_string();
        assert!(e.contains("only WaitCmp.Ge"), "{e}");
        assert_eq!(traffic(&devs), before, "nothing was sent");

        // One signal, two collectives in flight on one rank: the second is
        // refused with the fix (the first fails at the deadline, naming the
        // rank it waited for).
        let (first, second) = tokio::join!(
            d.barrier(&mesh),
            d.allreduce(&t, &mesh, ReduceOp::Sum, Algo::Mesh)
        );
        let e = msg(second);
        assert!(
            e.contains("allreduce: the signal 'mesh' is in use by a concurrent barrier on this rank; give each concurrent collective its own signal"),
            "{e}"
        );
        assert!(msg(first).contains("rank 1 never arrived"));
    });
}

#[test]
fn defer_wait_completes_the_kernel_only_once_its_condition_holds() {
    run(async {
        let devs = devices(2, Duration::from_secs(2)).await;
        let sigs: Vec<_> = devs
            .iter()
            .map(|d| d.alloc::<i32>("s", "signal", [2, 1]).unwrap())
            .collect();
        devs[0].defer_wait(&sigs[0], [1, 0], 2, Cmp::Ge).unwrap();
        devs[1]
            .notify(&sigs[1], 0, [1, 0], 2, NotifyOp::AtomicAdd)
            .await
            .unwrap();
        devs[0].complete().await.unwrap();
        devs[0].defer_wait(&sigs[0], [1, 0], 5, Cmp::Ge).unwrap();
        let e = devs[0].complete().await.unwrap_err().to_string();
        assert!(e.contains("defer_wait on 's'[1, 0] >= 5 never held"), "{e}");
    });
}

#[test]
fn put_and_get_take_window_views_and_loads_take_n_d_regions() {
    run(async {
        let devs = devices(2, Duration::from_secs(10)).await;
        let d = &devs[0];
        let buf = d.alloc_window_buffer("ab", 2 * 4 * 8 * 4).unwrap();
        // Two views of one buffer: [2, 4, 8] and its [8, 8] rows.
        let cube = d.window::<f32>(&buf, &[2, 4, 8]).unwrap();
        assert_eq!(cube.shape(), [8, 8]);
        let e = d.window::<f32>(&buf, &[3, 4, 8]).unwrap_err().to_string();
        assert!(
            e.contains("a view of 384 bytes does not fit in buffer 'ab' of 256 bytes"),
            "{e}"
        );
        let x = launch::input::<f32>("x", 0, [8, 8]);
        d.put(&cube, 0, &x, Default::default()).await.unwrap();
        // Window view → peer (put), peer → window view (get).
        let other = devs[1].alloc_window_buffer("ab", 256).unwrap();
        let theirs = devs[1].window::<f32>(&other, &[8, 8]).unwrap();
        d.put(
            &theirs,
            1,
            &cube,
            pld_sim::PutOpts::region([4, 0], [0, 0], [2, 8]),
        )
        .await
        .unwrap();
        let got = devs[1].read_own(&theirs).await.unwrap();
        assert_eq!(&got.data()[32..48], &x.data()[0..16]);
        d.get(
            &cube,
            1,
            &theirs,
            pld_sim::PutOpts::region([0, 0], [4, 0], [2, 8]),
        )
        .await
        .unwrap();
        let back = d.read_own(&cube).await.unwrap();
        assert_eq!(&back.data()[0..16], &x.data()[0..16]);
        // An N-D load: [1, 2, 8] at [1, 2, 0] is rows 6..8 of the collapse.
        let tile = d
            .load_nd(&cube, &[2, 4, 8], &[1, 2, 0], &[1, 2, 8])
            .await
            .unwrap();
        assert_eq!(tile.data(), &x.data()[48..64]);
    });
}

/// Rank 0 allocates one buffer more than the others.
struct Lopsided;

impl Program for Lopsided {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        if dev.rank() == 0 {
            dev.alloc_window_buffer("only_on_rank_0", 64)?;
        }
        dev.alloc_window_buffer("shared", 64)?;
        Ok(Check::default())
    }
}

/// Rank 1 allocates a buffer nobody else does, last.
struct Trailing;

impl Program for Trailing {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        dev.alloc_window_buffer("shared", 64)?;
        if dev.rank() == 1 {
            dev.alloc_window_buffer("extra", 64)?;
        }
        Ok(Check::default())
    }
}

#[test]
fn a_rank_that_allocates_differently_is_named_with_the_buffer() {
    run(async {
        let args =
            <Args as clap::Parser>::try_parse_from(["t", "-d", "0,1", "--timeout", "5s"]).unwrap();
        let e = launch::run(&args, Arc::new(Lopsided))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("window buffer #0 is 'shared'")
                || e.contains("window buffer #0 is 'only_on_rank_0'"),
            "{e}"
        );
        assert!(
            e.contains("on rank 0") && e.contains("on rank 1") && e.contains("if rank =="),
            "{e}"
        );
        let e = launch::run(&args, Arc::new(Trailing))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("rank 1 allocated window buffer 'extra' but rank 0 did not"),
            "{e}"
        );
    });
}
