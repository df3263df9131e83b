//! `pld-bench grpc`: the client plane's latency, as a program in any
//! language meets it.
//!
//! For each peer-plane transport (QUIC, TCP) and progress mode (sleep,
//! spin) it starts two `pld-daemon`s with their defaults (mutual TLS under
//! a throwaway CA, a gRPC port each) and times, from one gRPC client of
//! rank 0, unary calls of 8 B: `grpc.health.v1.Health/Check` (the floor: a
//! gRPC round trip that does nothing), and `Put` / `Get` to rank 0 itself
//! and to rank 1 (a peer-plane round trip inside the call). The calls are
//! interleaved — one of each per round — so that a slow phase of the
//! machine lands on all of them alike, and each figure is given as a ratio
//! of the Check's median measured in the same run by the same client.
//!
//! With `--python PYTHON` (an interpreter with `pld-client` installed) the
//! Python client (`python -m pld_client.bench`) times the same calls
//! against the same daemons right after, as most programs meet pld.

use crate::procs::Proc;
use anyhow::{Context, bail};
use pld_grpc::pld_client::PldClient;
use pld_proto::v1::{GetRequest, PutRequest};
use pld_server::transport::free_loopback_port;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// The calls of one round, in the order they run.
const CALLS: [&str; 5] = ["check", "put_own", "put_remote", "get_own", "get_remote"];

/// One call's figures in one configuration.
#[derive(Debug, Clone)]
pub struct CallFigure {
    /// `rust` (tonic, in this process) or `python` (grpcio).
    pub client: &'static str,
    pub transport: &'static str,
    pub progress: &'static str,
    pub call: &'static str,
    pub median_us: f64,
    pub p99_us: f64,
    /// This call's median over the same configuration's Check median.
    pub median_ratio: f64,
    /// This call's p99 over the same configuration's Check median.
    pub p99_ratio: f64,
}

/// Two daemons with gRPC ports, killed when dropped.
struct Pair {
    _daemons: Vec<Proc>,
    grpc: Vec<String>,
}

fn start_pair(daemon: &Path, tls: &Path, transport: &str, progress: &str) -> anyhow::Result<Pair> {
    let port = || -> anyhow::Result<String> { Ok(format!("127.0.0.1:{}", free_loopback_port()?)) };
    let peers = [port()?, port()?];
    let grpc = vec![port()?, port()?];
    let mut daemons = Vec::new();
    for (r, addr) in grpc.iter().enumerate() {
        let mut c = Command::new(daemon);
        c.args(["--rank", &r.to_string(), "--peers", &peers.join(",")])
            .args(["--transport", transport, "--progress", progress])
            .args(["--grpc", addr])
            .arg("--tls-dir")
            .arg(tls)
            // Quiet: the daemons are killed at the end, and the survivor
            // would warn that its peer is gone.
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped());
        daemons.push(Proc(c.spawn().context("starting pld-daemon")?));
    }
    for d in &mut daemons {
        // The first line names the gRPC port; the second says ready.
        let out = d.0.stdout.take().context("daemon stdout")?;
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(out));
        loop {
            match lines.next() {
                Some(Ok(l)) if l.contains(" ready on ") => break,
                Some(Ok(_)) => continue,
                _ => bail!("a pld-daemon ({transport}, {progress}) exited before it was ready"),
            }
        }
    }
    Ok(Pair {
        _daemons: daemons,
        grpc,
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Times `rounds` rounds of every call against `pair`, after a warm-up.
async fn measure(pair: &Pair, rounds: usize) -> anyhow::Result<Vec<Vec<f64>>> {
    let channel = Channel::from_shared(format!("http://{}", pair.grpc[0]))?
        .connect()
        .await
        .context("connecting to rank 0's gRPC port")?;
    let mut health = HealthClient::new(channel.clone());
    let mut pld = PldClient::new(channel);
    let data = vec![7u8; 8];
    let mut samples = vec![Vec::with_capacity(rounds); CALLS.len()];
    let warmup = rounds / 10;
    for round in 0..warmup + rounds {
        for (i, call) in CALLS.iter().enumerate() {
            let rank = u32::from(call.ends_with("remote"));
            let t0 = Instant::now();
            match *call {
                "check" => {
                    health
                        .check(HealthCheckRequest {
                            service: String::new(),
                        })
                        .await?;
                }
                "put_own" | "put_remote" => {
                    pld.put(PutRequest {
                        rank,
                        window: "data".into(),
                        offset: 0,
                        data: data.clone().into(),
                        region: None,
                    })
                    .await?;
                }
                _ => {
                    let got = pld
                        .get(GetRequest {
                            rank,
                            window: "data".into(),
                            offset: 0,
                            len: 8,
                            region: None,
                        })
                        .await?;
                    if got.get_ref().data.len() != 8 {
                        bail!("Get returned {} bytes, not 8", got.get_ref().data.len());
                    }
                }
            }
            if round >= warmup {
                samples[i].push(t0.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    Ok(samples)
}

/// Runs the Python client's timing loop against rank 0 of `pair`: per
/// call, its median and p99 in µs.
fn measure_python(python: &Path, pair: &Pair, rounds: usize) -> anyhow::Result<Vec<(f64, f64)>> {
    let out = Command::new(python)
        .args(["-m", "pld_client.bench", "--tsv", "--daemon", &pair.grpc[0]])
        .args(["--rounds", &rounds.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {} -m pld_client.bench", python.display()))?;
    if !out.status.success() {
        bail!("{} -m pld_client.bench failed", python.display());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    CALLS
        .iter()
        .map(|call| {
            let line = text
                .lines()
                .find(|l| l.split('\t').next() == Some(*call))
                .with_context(|| format!("pld_client.bench printed no {call} line"))?;
            let mut f = line.split('\t').skip(1).map(str::parse::<f64>);
            match (f.next(), f.next()) {
                (Some(Ok(m)), Some(Ok(p))) => Ok((m, p)),
                _ => bail!("pld_client.bench printed an unreadable line: {line}"),
            }
        })
        .collect()
}

fn figures(
    client: &'static str,
    transport: &'static str,
    progress: &'static str,
    stats: &[(f64, f64)],
) -> Vec<CallFigure> {
    let check = stats[0].0;
    CALLS
        .iter()
        .zip(stats)
        .map(|(call, &(median, p99))| CallFigure {
            client,
            transport,
            progress,
            call,
            median_us: median,
            p99_us: p99,
            median_ratio: median / check,
            p99_ratio: p99 / check,
        })
        .collect()
}

/// Runs every configuration; `rounds` rounds of the five calls each.
pub async fn run(
    daemon: &Path,
    tls_dir: Option<&Path>,
    python: Option<&Path>,
    quick: bool,
) -> anyhow::Result<Vec<CallFigure>> {
    let rounds = if quick { 300 } else { 3000 };
    let scratch;
    let tls = match tls_dir {
        Some(d) => d,
        None => {
            scratch = pld_server::tls::TempTlsDir::named("pld-bench-certs", "pld-bench", 2, &[])?;
            scratch.path()
        }
    };
    let mut figs = Vec::new();
    for transport in ["quic", "tcp"] {
        for progress in ["sleep", "spin"] {
            let pair = start_pair(daemon, tls, transport, progress)?;
            let mut samples = measure(&pair, rounds).await?;
            let stats: Vec<(f64, f64)> = samples
                .iter_mut()
                .map(|s| {
                    s.sort_by(f64::total_cmp);
                    (percentile(s, 0.5), percentile(s, 0.99))
                })
                .collect();
            figs.extend(figures("rust", transport, progress, &stats));
            if let Some(py) = python {
                let stats = measure_python(py, &pair, rounds)?;
                figs.extend(figures("python", transport, progress, &stats));
            }
        }
    }
    Ok(figs)
}

/// Prints the figures: a table, or one JSON object per line.
pub fn print(figs: &[CallFigure], json: bool) {
    if !json {
        println!(
            "{:<6} {:<6} {:<6} {:<11} {:>10} {:>10} {:>13} {:>10}",
            "client",
            "plane",
            "prog",
            "call (8 B)",
            "median us",
            "p99 us",
            "median/check",
            "p99/check"
        );
    }
    for f in figs {
        if json {
            println!(
                "{{\"op\": \"grpc_{}\", \"size\": 8, \"client\": \"{}\", \"transport\": \"{}\", \"progress\": \"{}\", \"median_us\": {:.1}, \"p99_us\": {:.1}, \"baseline\": \"grpc_check\", \"median_ratio\": {:.3}, \"p99_ratio\": {:.3}}}",
                f.call,
                f.client,
                f.transport,
                f.progress,
                f.median_us,
                f.p99_us,
                f.median_ratio,
                f.p99_ratio
            );
        } else {
            println!(
                "{:<6} {:<6} {:<6} {:<11} {:>10.1} {:>10.1} {:>12.2}x {:>9.2}x",
                f.client,
                f.transport,
                f.progress,
                f.call,
                f.median_us,
                f.p99_us,
                f.median_ratio,
                f.p99_ratio
            );
        }
    }
}
