//! A rank as a program, the way an MPI program is one: embeds a pld rank
//! and runs a scenario, so that multi-process tests can put every rank of
//! a cluster in its own process.
//!
//! ```text
//! pld-test-rank --rank R --peers A,B,.. --transport quic|tcp [--sync-timeout 20s] SCENARIO
//!   barriers N               N back-to-back barriers
//!   ring-store N MAX_DELAY_US  the seed's store mode N times: put x[r] into rank r+1,
//!                            barrier, find x[r-1] in the own window
//! ```
//! Prints `ok ...` with the counters and exits 0, or prints the error and exits 1.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use anyhow::{Context, bail};
use pld_proto::MsgKind;
use pld_server::config::parse_duration;
use pld_server::{Rank, TransportKind};
use std::time::Duration;

struct Args {
    rank: u32,
    peers: Vec<String>,
    transport: TransportKind,
    sync_timeout: Duration,
    scenario: Vec<String>,
}

fn parse() -> anyhow::Result<Args> {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        rank: 0,
        peers: Vec::new(),
        transport: TransportKind::Quic,
        sync_timeout: Duration::from_secs(20),
        scenario: Vec::new(),
    };
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--rank" => a.rank = value()?.parse()?,
            "--peers" => a.peers = value()?.split(',').map(String::from).collect(),
            "--transport" => a.transport = value()?.parse().map_err(anyhow::Error::msg)?,
            "--sync-timeout" => {
                a.sync_timeout = parse_duration(&value()?).map_err(anyhow::Error::msg)?
            }
            _ => {
                a.scenario.push(arg);
                a.scenario.extend(it.by_ref());
            }
        }
    }
    Ok(a)
}

/// The value rank `r` stores in iteration `i`.
fn x(r: u32, i: u64) -> u64 {
    (r as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i.wrapping_mul(0xD1B5_4A32_D192_ED03)
}

/// A random pause: a perturbation of the interleaving, not synchronisation.
async fn jitter(rng: &mut u64, max_us: u64) {
    if max_us == 0 {
        return;
    }
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let us = *rng % (max_us + 1);
    if us > max_us / 2 {
        tokio::time::sleep(Duration::from_micros(us)).await;
    } else {
        for _ in 0..us / 10 {
            tokio::task::yield_now().await;
        }
    }
}

async fn run(a: Args) -> anyhow::Result<String> {
    let mut config = pld_tests::rank_config(a.rank, &a.peers, a.transport);
    config.sync_timeout = a.sync_timeout;
    let rank = Rank::start(config).await?;
    let before = rank.stats().msgs_sent(MsgKind::Barrier);
    let words: Vec<&str> = a.scenario.iter().map(String::as_str).collect();
    let summary = match words.as_slice() {
        ["barriers", n] => {
            let n: u64 = n.parse()?;
            for i in 0..n {
                rank.barrier()
                    .await
                    .with_context(|| format!("barrier {} of {n}", i + 1))?;
            }
            format!("barriers={n}")
        }
        ["ring-store", n, max_delay] => {
            let (n, max_delay): (u64, u64) = (n.parse()?, max_delay.parse()?);
            let (me, p) = (rank.rank(), rank.nranks());
            let (next, prev) = ((me + 1) % p, (me + p - 1) % p);
            let data = rank.window("data")?;
            let mut rng = 0x2545_F491_4F6C_DD1D ^ (me as u64 + 1);
            for i in 0..n {
                // Two slots: iteration i+1's put cannot touch what iteration i reads.
                let slot = (i % 2) * 8;
                jitter(&mut rng, max_delay).await;
                rank.put(next, data, slot, &x(me, i).to_le_bytes()).await?;
                jitter(&mut rng, max_delay).await;
                rank.barrier()
                    .await
                    .with_context(|| format!("iteration {i}"))?;
                let got = rank.local(data)?.read(slot, 8)?;
                let got =
                    u64::from_le_bytes(got.try_into().map_err(|_| anyhow::anyhow!("8 bytes"))?);
                if got != x(prev, i) {
                    bail!(
                        "iteration {i}: rank {me} found {got:#x} in its window, expected x[{prev}] = {:#x}",
                        x(prev, i)
                    );
                }
            }
            format!("ring-store={n}")
        }
        other => bail!("unknown scenario {other:?}"),
    };
    let sent = rank.stats().msgs_sent(MsgKind::Barrier) - before;
    rank.shutdown().await;
    Ok(format!("ok {summary} barrier_msgs_sent={sent}"))
}

fn main() -> std::process::ExitCode {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pld-test-rank: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match parse().and_then(|a| rt.block_on(run(a))) {
        Ok(line) => {
            println!("{line}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pld-test-rank: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
