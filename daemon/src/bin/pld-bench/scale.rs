//! Many ranks on one machine. `barrier_lat`: rank 0's mean barrier latency
//! among P processes. `scale`: P processes (rank 0 here, the rest helper
//! processes) — how long the cluster takes to form (from the first spawn
//! until every rank has every link), each rank's resident memory once it
//! has run its barriers, and the mean latency of a barrier and of an
//! all-reduce of 8 fp32 values (mesh: P puts per rank, two barriers).

use crate::cli::{BARRIER_WINDOWS, Cli, config, loopback};
use crate::procs::{Proc, me_as, status_mib};
use crate::report::Figure;
use pld_proto::ReduceOp;
use pld_proto::collective::{self as coll, Algo, Scratch};
use pld_server::Rank;
use std::time::Instant;

/// Iterations at `p` ranks: fewer as P grows (each barrier of 64 ranks on
/// two cores takes milliseconds).
fn iters(p: u32, quick: bool) -> usize {
    match (p, quick) {
        (_, true) => 100,
        (0..=2, _) => 5000,
        (3..=4, _) => 2000,
        (5..=16, _) => 500,
        _ => 200,
    }
}

/// An all-reduce of 8 fp32 values over the rank's `data` window.
async fn allreduce(rank: &Rank) -> anyhow::Result<()> {
    let window = rank.window("data")?;
    let s = Scratch {
        window,
        base: 0,
        bytes: 64 * 1024,
    };
    let x = [rank.rank() as f32; 8];
    coll::allreduce(rank, &s, &x, ReduceOp::Sum, Algo::Mesh).await?;
    Ok(())
}

/// A helper rank: forms the cluster, says `ready`, runs `--iters`
/// barriers (and a tenth more of warm-up), then as many all-reduces if
/// asked to, and leaves.
pub async fn helper_rank(cli: &Cli, with_allreduce: bool) -> anyhow::Result<()> {
    let rank = Rank::start(config(cli.rank, &cli.peers, cli, &BARRIER_WINDOWS)?).await?;
    println!("ready");
    let n = cli.iters + cli.iters / 10;
    for _ in 0..n {
        rank.barrier().await?;
    }
    if with_allreduce {
        for _ in 0..n {
            allreduce(&rank).await?;
        }
    }
    rank.shutdown().await;
    Ok(())
}

/// Starts P − 1 helper ranks (`mode`) running `iters` iterations.
fn spawn_helpers(
    cli: &Cli,
    peers: &[String],
    mode: &str,
    iters: usize,
) -> anyhow::Result<Vec<Proc>> {
    let mut children = Vec::new();
    for r in 1..peers.len() {
        let mut c = me_as(cli, mode)?;
        c.args([
            "--rank",
            &r.to_string(),
            "--peers",
            &peers.join(","),
            "--iters",
            &iters.to_string(),
        ]);
        children.push(Proc(c.spawn()?));
    }
    Ok(children)
}

/// Mean of `f` over `iters` calls, after a tenth as many of warm-up (us).
async fn mean_us<F, Fut>(iters: usize, mut f: F) -> anyhow::Result<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    for _ in 0..iters / 10 {
        f().await?;
    }
    let t0 = Instant::now();
    for _ in 0..iters {
        f().await?;
    }
    Ok(t0.elapsed().as_secs_f64() * 1e6 / iters as f64)
}

/// Mean barrier latency at rank 0 of `p` processes.
pub async fn barrier_lat(cli: &Cli, p: u32) -> anyhow::Result<Figure> {
    let iters = iters(p, cli.quick);
    let peers = loopback(p as usize)?;
    let children = spawn_helpers(cli, &peers, "barrier-rank", iters)?;
    let rank = Rank::start(config(0, &peers, cli, &BARRIER_WINDOWS)?).await?;
    let us = mean_us(iters, || async { Ok(rank.barrier().await?) }).await?;
    rank.shutdown().await;
    for mut c in children {
        c.0.wait()?;
    }
    Ok(Figure::lat("barrier_lat", p as u64, us))
}

/// The `scale` figures at `p` ranks.
pub async fn scale(cli: &Cli, p: u32) -> anyhow::Result<Vec<Figure>> {
    let iters = iters(p, cli.quick);
    let peers = loopback(p as usize)?;
    let t0 = Instant::now();
    let mut children = spawn_helpers(cli, &peers, "scale-rank", iters)?;
    let rank = Rank::start(config(0, &peers, cli, &BARRIER_WINDOWS)?).await?;
    // Formed once every helper has its links too (its ready line).
    let outs: Vec<_> = children.iter_mut().map(|c| c.0.stdout.take()).collect();
    let ready = tokio::task::spawn_blocking(move || {
        for out in outs.into_iter().flatten() {
            Proc::read_ready(out)?;
        }
        anyhow::Ok(())
    });
    ready.await??;
    let formed_ms = t0.elapsed().as_secs_f64() * 1e3;
    let put_quiet = put_quiet_us(&rank, iters * 10).await?;
    let barrier = mean_us(iters, || async { Ok(rank.barrier().await?) }).await?;
    // The helpers run their all-reduces now: measure their memory first.
    let rss: Vec<f64> = children
        .iter()
        .filter_map(|c| status_mib(c.0.id(), "VmRSS:"))
        .collect();
    let allreduce = mean_us(iters, || allreduce(&rank)).await?;
    rank.shutdown().await;
    for mut c in children {
        c.0.wait()?;
    }
    let mean = rss.iter().sum::<f64>() / rss.len().max(1) as f64;
    let max = rss.iter().cloned().fold(0.0, f64::max);
    Ok(vec![
        Figure::new("scale_formed", p as u64, formed_ms, "ms"),
        Figure::new("scale_rss_mean", p as u64, mean, "MiB"),
        Figure::new("scale_rss_max", p as u64, max, "MiB"),
        Figure::lat("put_quiet_lat", p as u64, put_quiet),
        Figure::lat("barrier_lat", p as u64, barrier),
        Figure::lat("allreduce_lat", p as u64, allreduce),
    ])
}

/// An 8 B `put_nbi` to rank 1 then `quiet`, while the other ranks wait in
/// their first barrier: what a quiet costs with P − 1 links (us). The put
/// lands in rank 0's all-reduce slot at rank 1, which every all-reduce
/// writes before it reads.
async fn put_quiet_us(rank: &Rank, iters: usize) -> anyhow::Result<f64> {
    let data = rank.window("data")?;
    mean_us(iters, || async {
        rank.put_nbi(1, data, 0, &[1u8; 8]).await?;
        Ok(rank.quiet().await?)
    })
    .await
}
