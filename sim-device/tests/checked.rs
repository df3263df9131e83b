//! `--checked` on real ranks: each run-time row of the seed's failure
//! catalog, as a broken variant of a tutorial program, is reported with
//! both ranks and the region, once, and fails the run — at P = 2 and 4,
//! over QUIC and TCP; the fixed programs report nothing.

use clap::Parser;
use pld_sim::launch::{self, Args, Check, Program};
use pld_sim::{Atomic, Cmp, Device, Dtype, Error, NotifyOp, PutOpts, Result, Rma, Tensor};
use std::sync::Arc;

const SIZE: u64 = 64;

/// The broken (or fixed) programs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Case {
    /// Step 05, load mode: stage, barrier, remote_load (fixed).
    LoadOrdered,
    /// Step 05, load mode without the barrier.
    LoadNoBarrier,
    /// Step 05, store mode with the barrier before the store.
    StoreBarrierFirst,
    /// Step 06, put mode reading its window before the wait.
    PutReadBeforeWait,
    /// A mesh all-reduce that reads every peer before their signal.
    MeshEarlyRead,
    /// A ring pass that reuses its signal cell without clearing it.
    RingReusedSignal,
    /// Two ranks storing into rank 0's slice without atomics.
    TwoStores,
    /// Every rank increments rank 0's counter (get, add, put) holding a
    /// compare_swap lock on rank 0 (fixed), or without it.
    Counter { locked: bool },
}

/// Where the lock and the counter live (past the tensors the cases allocate).
const LOCK: u64 = 60 << 10;
const COUNTER: u64 = 1 << 20;

async fn increment<R: Rma>(dev: &Device<R>, locked: bool) -> std::result::Result<(), String> {
    let r = dev.rma();
    let err = |e: R::Error| e.to_string();
    let sig = r.window("signal").map_err(err)?;
    let data = r.window("data").map_err(err)?;
    if locked {
        while r
            .compare_swap(0, sig, LOCK, Dtype::Int64, 0, 1)
            .await
            .map_err(err)?
            != 0
        {
            tokio::task::yield_now().await;
        }
    }
    let v = r.get(0, data, COUNTER, 8).await.map_err(err)?;
    let n = i64::from_le_bytes(v[..8].try_into().map_err(|_| "short read")?) + 1;
    r.put(0, data, COUNTER, &n.to_le_bytes())
        .await
        .map_err(err)?;
    if locked {
        r.compare_swap(0, sig, LOCK, Dtype::Int64, 1, 0)
            .await
            .map_err(err)?;
    }
    Ok(())
}

impl Program for Case {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let data = dev.alloc::<f32>("data", "data", [1, SIZE])?;
        let half = dev.alloc::<f32>("half", "data", [1, SIZE])?;
        let signal = dev.alloc::<i32>("signal", "signal", [u64::from(n), 1])?;
        let bar = dev.alloc::<i32>("bar", "signal", [u64::from(n), 1])?;
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        let mut y = Tensor::<f32>::zeros("y", [1, SIZE]);
        let (next, prev) = (dev.peer_next(1), dev.peer_prev(1));
        let tile = dev.load(&x, [0, 0], [1, SIZE]).await?;
        match self {
            Case::LoadOrdered | Case::LoadNoBarrier => {
                dev.store(&tile, [0, 0], &data).await?;
                if *self == Case::LoadOrdered {
                    dev.barrier(&signal).await?;
                }
                let recv = dev
                    .remote_load(&data, next, [0, 0], [1, SIZE], None)
                    .await?;
                dev.store(&recv, [0, 0], &mut y).await?;
            }
            Case::StoreBarrierFirst => {
                dev.barrier(&signal).await?;
                dev.tile_remote_store(&tile, &data, next, [0, 0], Atomic::None)
                    .await?;
                let back = dev.load(&data, [0, 0], [1, SIZE]).await?;
                dev.store(&back, [0, 0], &mut y).await?;
            }
            Case::PutReadBeforeWait => {
                dev.put(&data, next, &x, PutOpts::default()).await?;
                dev.notify(&signal, next, [0, 0], 1, NotifyOp::AtomicAdd)
                    .await?;
                let early = dev.load(&data, [0, 0], [1, SIZE]).await?;
                dev.store(&early, [0, 0], &mut y).await?;
                dev.wait(&signal, [0, 0], 1, Cmp::Ge).await?;
            }
            Case::MeshEarlyRead => {
                dev.store(&tile, [0, 0], &data).await?;
                for p in (0..n).filter(|&p| p != me) {
                    dev.notify(&signal, p, [u64::from(me), 0], 1, NotifyOp::AtomicAdd)
                        .await?;
                }
                for p in (0..n).filter(|&p| p != me) {
                    let recv = dev.remote_load(&data, p, [0, 0], [1, SIZE], None).await?;
                    dev.store(&recv, [0, 0], &mut y).await?;
                }
                for p in (0..n).filter(|&p| p != me) {
                    dev.wait(&signal, [u64::from(p), 0], 1, Cmp::Ge).await?;
                }
            }
            Case::RingReusedSignal => {
                // Round 1 stages the first half and signals; round 2 the
                // second half, on the same cell, waiting for >= 1 again.
                for (round, t) in [(0u64, &data), (1, &half)] {
                    dev.store(&tile, [0, 0], t).await?;
                    dev.notify(&signal, next, [0, 0], 1, NotifyOp::AtomicAdd)
                        .await?;
                    dev.wait(&signal, [0, 0], 1, Cmp::Ge).await?;
                    let recv = dev.remote_load(t, prev, [0, 0], [1, SIZE], None).await?;
                    dev.store(&recv, [0, 0], &mut y).await?;
                    let _ = round;
                }
            }
            Case::TwoStores => {
                // Ranks 1 and 2 (at P = 2: rank 1 and the owner itself).
                if me == 1 || (n > 2 && me == 2) {
                    dev.tile_remote_store(&tile, &data, 0, [0, 0], Atomic::None)
                        .await?;
                }
                if n == 2 && me == 0 {
                    dev.store(&tile, [0, 0], &data).await?;
                }
            }
            Case::Counter { locked } => {
                increment(&dev, *locked).await.map_err(Error::Usage)?;
            }
        }
        // Nobody leaves while a peer may still touch its window.
        dev.barrier(&bar).await?;
        Ok(Check::default())
    }
}

fn run(case: Case, p: u32, transport: &str) -> Result<()> {
    run_as(case, p, transport, "--checked")
}

fn run_as(case: Case, p: u32, transport: &str, checked: &str) -> Result<()> {
    let devices = (0..p).map(|d| d.to_string()).collect::<Vec<_>>().join(",");
    let args = Args::try_parse_from([
        "checked",
        "-d",
        &devices,
        "--transport",
        transport,
        checked,
        "--timeout",
        "20s",
    ])
    .map_err(|e| Error::Usage(e.to_string()))?;
    let rt = tokio::runtime::Runtime::new().map_err(|e| Error::Usage(e.to_string()))?;
    rt.block_on(launch::run(&args, Arc::new(case))).map(|_| ())
}

fn races(case: Case, p: u32, transport: &str) -> Vec<String> {
    match run(case, p, transport) {
        Ok(()) => Vec::new(),
        Err(Error::Races { reports }) => reports,
        Err(e) => panic!("{case:?} at P={p} over {transport} failed otherwise: {e}"),
    }
}

#[test]
fn every_catalog_race_is_reported_once_with_both_ranks_and_the_region() {
    for transport in ["quic", "tcp"] {
        for p in [2, 4] {
            let ctx = format!("P={p} over {transport}");
            assert!(races(Case::LoadOrdered, p, transport).is_empty(), "{ctx}");

            let got = races(Case::LoadNoBarrier, p, transport);
            assert_eq!(got.len(), p as usize, "{ctx}: one per owner: {got:#?}");
            let r0 = got
                .iter()
                .find(|r| r.contains("rank 0's window"))
                .expect("rank 0's race");
            assert!(r0.contains("rank 0 stored into its own"), "{ctx}: {r0}");
            assert!(r0.contains(&format!("rank {} read", p - 1)), "{ctx}: {r0}");
            assert!(
                r0.contains("bytes 0..256 (data[0, 0:64] of [1, 64])"),
                "{ctx}: {r0}"
            );
            assert!(
                r0.contains("in load mode, stage, then barrier, then remote_load"),
                "{r0}"
            );

            let got = races(Case::StoreBarrierFirst, p, transport);
            assert_eq!(got.len(), p as usize, "{ctx}: {got:#?}");
            assert!(
                got.iter().all(|r| r.contains("in store mode")),
                "{ctx}: {got:#?}"
            );

            let got = races(Case::PutReadBeforeWait, p, transport);
            assert_eq!(got.len(), p as usize, "{ctx}: {got:#?}");

            let got = races(Case::MeshEarlyRead, p, transport);
            assert_eq!(got.len(), (p * (p - 1)) as usize, "{ctx}: {got:#?}");

            let got = races(Case::RingReusedSignal, p, transport);
            assert_eq!(got.len(), p as usize, "{ctx}: {got:#?}");
            assert!(
                got.iter().all(|r| r.contains("bytes 256..512")),
                "{ctx}: {got:#?}"
            );

            let got = races(Case::TwoStores, p, transport);
            assert_eq!(got.len(), 1, "{ctx}: {got:#?}");
            assert!(
                got[0].contains("two ranks write the same bytes"),
                "{ctx}: {got:#?}"
            );
        }
    }
}

#[test]
fn a_counter_behind_a_compare_swap_lock_is_accepted_and_races_without_it() {
    for (p, transport) in [(2, "tcp"), (4, "quic")] {
        let ok = races(Case::Counter { locked: true }, p, transport);
        assert!(ok.is_empty(), "P={p}: {ok:#?}");
        let got = races(Case::Counter { locked: false }, p, transport);
        assert!(!got.is_empty(), "P={p}: the unlocked counter races");
        assert!(
            got.iter()
                .all(|r| r.contains("rank 0's window 'data' bytes 1048576..1048584")),
            "{got:#?}"
        );
    }
}

#[test]
fn strict_mode_fails_the_racing_op_itself() {
    // The get races the owner's store whichever comes first: strict mode
    // refuses it (or the store) with the race report, before applying.
    let e = run_as(Case::LoadNoBarrier, 2, "tcp", "--checked=strict").expect_err("refused");
    let msg = e.to_string();
    assert!(msg.contains("race on rank"), "{msg}");
}

#[test]
fn the_report_of_a_racy_program_is_the_same_in_every_run() {
    let first = races(Case::MeshEarlyRead, 4, "quic");
    assert!(!first.is_empty());
    for i in 0..20 {
        assert_eq!(races(Case::MeshEarlyRead, 4, "quic"), first, "run {i}");
    }
}
