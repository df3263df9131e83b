//! `pld-bench`: pld's micro-benchmarks in the style of the OSU suite, with
//! the transport's raw floor and (optionally) Open MPI measured in the same
//! run, and every figure given as a ratio of them.
//!
//! ```text
//! pld-bench all --transport tcp --progress spin            # a table
//! pld-bench all --transport quic --json                    # JSON lines
//! pld-bench put_lat get_bw --sizes 8,4MiB --mpi            # beside MPI RMA
//! pld-bench put_lat put_bw --mpi --plot plots               # and as charts
//! pld-bench grpc                                           # the client plane
//! ```
//! By default it starts its own target: a `pld-daemon` (rank 1) next to
//! this binary; rank 0 runs in this process. `grpc` starts two daemons per
//! transport and progress mode and times gRPC calls against them instead.

mod cli;
mod crypto;
mod grpc;
mod measure;
mod mpi;
mod plot;
mod procs;
mod raw;
mod report;
mod scale;

use anyhow::{Context, bail};
use clap::Parser;
use cli::{BENCHES, Cli, EXTRA, WINDOWS, config, loopback};
use pld_server::transport::free_loopback_port;
use pld_server::{Progress, Rank, TransportKind};
use procs::{Proc, me_as, peak_mem, sibling};
use report::{Baselines, Figure};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match cli.internal.as_deref() {
        Some("raw-server") => {
            let addr = cli.listen.context("--listen")?;
            rt.block_on(raw::serve(
                cli.transport,
                cli.progress(),
                cli.raw_impl.parse().map_err(anyhow::Error::msg)?,
                addr,
            ))
        }
        Some("barrier-rank") => rt.block_on(scale::helper_rank(&cli, false)),
        Some("scale-rank") => rt.block_on(scale::helper_rank(&cli, true)),
        Some(other) => bail!("unknown internal mode {other}"),
        None => {
            for b in &cli.benches {
                if b != "all" && !BENCHES.contains(&b.as_str()) && !EXTRA.contains(&b.as_str()) {
                    bail!(
                        "unknown benchmark {b}: use all or any of {} {}",
                        BENCHES.join(" "),
                        EXTRA.join(" ")
                    );
                }
            }
            // The measurements run as a task of their own, as most programs'
            // RMA calls do, rather than as the runtime's block_on future.
            let cli = std::sync::Arc::new(cli);
            rt.block_on(async move { tokio::spawn(async move { run(&cli).await }).await? })
        }
    }
}

/// The raw floor: round trip and single-stream bandwidth each way.
async fn raw_floor(cli: &Cli, figs: &mut Vec<Figure>, base: &mut Baselines) -> anyhow::Result<()> {
    let spin_tcp =
        cli.transport == TransportKind::Tcp && matches!(cli.progress, Progress::Spin { .. });
    // With TCP and spin, the dedicated polling thread is the floor; tokio's
    // spinning sockets are measured next to it.
    let impls: &[(raw::Impl, &str)] = if spin_tcp {
        &[(raw::Impl::Thread, ""), (raw::Impl::Tokio, "_tokio")]
    } else {
        &[(raw::Impl::Tokio, "")]
    };
    for &(how, suffix) in impls {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_loopback_port()?).parse()?;
        let mut c = me_as(cli, "raw-server")?;
        c.args([
            "--listen",
            &addr.to_string(),
            "--raw-impl",
            if how == raw::Impl::Thread {
                "thread"
            } else {
                "tokio"
            },
        ]);
        let mut server = Proc(c.spawn()?);
        server.ready()?;
        let (kind, progress) = (cli.transport, cli.progress());
        if cli.wants("raw_rtt") || cli.wants("put_lat") {
            let d = raw::rtt(
                kind,
                progress,
                how,
                addr,
                if cli.quick { 2000 } else { 20_000 },
            )
            .await?;
            let us = d.as_secs_f64() * 1e6;
            figs.push(Figure::lat(&format!("raw_rtt{suffix}"), 8, us));
            if suffix.is_empty() {
                base.raw_rtt_us = Some(us);
            }
        }
        if cli.wants("raw_bw") || cli.wants("put_bw") || cli.wants("get_bw") {
            let bytes = if cli.quick { 64 << 20 } else { 2 << 30 };
            let put = raw::bw(kind, progress, how, addr, bytes, true).await?;
            let get = raw::bw(kind, progress, how, addr, bytes, false).await?;
            figs.push(Figure::bw(&format!("raw_bw{suffix}"), 64 << 20, put));
            figs.push(Figure::bw(&format!("raw_bw_get{suffix}"), 64 << 20, get));
            if suffix.is_empty() {
                base.raw_bw_put = Some(put);
                base.raw_bw_get = Some(get);
            }
        }
    }
    Ok(())
}

async fn run(cli: &Cli) -> anyhow::Result<()> {
    if cli.wants("grpc") {
        let figs = grpc::run(
            &sibling("pld-daemon")?,
            cli.tls_dir.as_deref(),
            cli.python.as_deref(),
            cli.quick,
        )
        .await?;
        grpc::print(&figs, cli.json);
        if cli.benches.iter().all(|b| b == "grpc") {
            return Ok(());
        }
    }
    let mut figs = Vec::new();
    let mut base = Baselines {
        raw_rtt_us: None,
        raw_bw_put: None,
        raw_bw_get: None,
        mpi: HashMap::new(),
    };
    if cli.wants("crypto_floor") {
        let time = Duration::from_millis(if cli.quick { 100 } else { 1000 });
        for (suffix, alg) in crypto::SUITES {
            let (seal, open) = crypto::floor(alg, time)?;
            let size = crypto::RECORD as u64;
            figs.push(Figure::bw(&format!("crypto_floor{suffix}"), size, seal));
            figs.push(Figure::bw(
                &format!("crypto_floor_open{suffix}"),
                size,
                open,
            ));
        }
    }
    if cli.wants("raw_rtt") || cli.wants("raw_bw") {
        raw_floor(cli, &mut figs, &mut base).await?;
    }

    // The cluster: rank 0 here; the target a pld-daemon, a rank on another
    // thread, or a running daemon.
    let ops = [
        "put_lat",
        "get_lat",
        "acc_lat",
        "fetch_add_lat",
        "cas_lat",
        "put_bw",
        "get_bw",
        "bibw",
        "msg_rate",
        "acc_rate",
        "peak_mem",
    ];
    let mut daemon = None;
    let mut in_process = None;
    if ops.iter().any(|o| cli.wants(o)) {
        let (peers, me, target) = if !cli.peers.is_empty() {
            (cli.peers.clone(), cli.rank, cli.target)
        } else {
            (loopback(2)?, 0, 1)
        };
        if cli.peers.is_empty() && cli.in_process {
            let c = config(1, &peers, cli, &WINDOWS)?;
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            in_process = Some((
                std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build();
                    if let Ok(rt) = rt {
                        rt.block_on(async move {
                            if let Ok(r) = Rank::start(c).await {
                                let _ = tokio::task::spawn_blocking(move || rx.recv()).await;
                                r.shutdown().await;
                            }
                        });
                    }
                }),
                tx,
            ));
        } else if cli.peers.is_empty() {
            let mut c = Command::new(sibling("pld-daemon")?);
            c.args([
                "--rank",
                "1",
                "--peers",
                &peers.join(","),
                "--transport",
                &cli.transport.to_string(),
            ])
            .args(["--progress", &cli.progress.to_string()])
            .args(["--spin-idle", &format!("{}ms", cli.spin_idle.as_millis())])
            .args(["--op-timeout", "60s"])
            .arg(format!("--checked={}", cli.checked))
            .args(match &cli.tls_dir {
                Some(dir) => vec!["--tls-dir".into(), dir.clone().into_os_string()],
                None => vec!["--insecure".into()],
            })
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped());
            for w in WINDOWS {
                c.args(["--window", w]);
            }
            daemon = Some(Proc(c.spawn().context("starting pld-daemon")?));
        }
        // The daemon's ready line is read on a blocking thread: rank 1 is
        // ready only once this rank has answered its Hello, which needs
        // this thread free. (Reading it here, synchronously, after our own
        // start, deadlocked whenever rank 1's dial came after ours: rank 1
        // then gave up after its connect timeout, issue 13.)
        let ready = daemon
            .as_mut()
            .and_then(|d| d.0.stdout.take())
            .map(|out| tokio::task::spawn_blocking(move || Proc::read_ready(out)));
        let rank = Rank::start(config(me, &peers, cli, &WINDOWS)?).await?;
        if let Some(ready) = ready {
            ready.await??;
        }
        let bench = measure::Bench {
            rank: &rank,
            peer: target,
            data: rank.window("data")?,
            quick: cli.quick,
            window: usize::from(cli.window),
        };
        let sizes = &cli.sizes;
        for &s in sizes {
            if cli.wants("put_lat") {
                figs.push(bench.put_lat(s).await?);
            }
            if cli.wants("get_lat") {
                figs.push(bench.get_lat(s).await?);
            }
            if cli.wants("acc_lat") {
                figs.push(bench.acc_lat(s).await?);
            }
        }
        if cli.wants("fetch_add_lat") {
            figs.push(bench.fetch_add_lat().await?);
        }
        if cli.wants("cas_lat") {
            figs.push(bench.cas_lat().await?);
        }
        for &s in sizes {
            if cli.wants("put_bw") {
                figs.push(bench.put_bw(s).await?);
            }
            if cli.wants("get_bw") {
                figs.push(bench.get_bw(s).await?);
                figs.push(bench.get_bw_nb(s).await?);
            }
            if cli.wants("bibw") {
                figs.push(bench.bibw(s).await?);
            }
        }
        if cli.wants("msg_rate") {
            figs.extend(bench.msg_rate().await?);
        }
        if cli.wants("acc_rate") {
            figs.extend(bench.acc_rate().await?);
        }
        if cli.wants("peak_mem") {
            if let Some(m) = peak_mem(std::process::id()) {
                figs.push(Figure {
                    op: "peak_mem_origin".into(),
                    size: 0,
                    value: m,
                    unit: "MiB",
                });
            }
            if let Some(m) = daemon.as_ref().and_then(|d| peak_mem(d.0.id())) {
                figs.push(Figure {
                    op: "peak_mem_target".into(),
                    size: 0,
                    value: m,
                    unit: "MiB",
                });
            }
        }
        rank.shutdown().await;
    }
    if let Some((t, tx)) = in_process {
        let _ = tx.send(());
        let _ = t.join();
    }
    drop(daemon);
    if cli.wants("barrier_lat") {
        for &p in &cli.ranks {
            figs.push(scale::barrier_lat(cli, p).await?);
        }
    }
    if cli.wants("scale") {
        for &p in &cli.ranks {
            figs.extend(scale::scale(cli, p).await?);
        }
    }
    if cli.mpi {
        base.mpi = mpi::run(cli)?;
    }
    let (transport, progress) = (cli.transport.to_string(), cli.progress.to_string());
    report::print(&figs, &base, &transport, &progress, cli.json);
    if let Some(dir) = &cli.plot {
        for file in plot::draw(dir, &figs, &base, &transport, &progress)? {
            eprintln!("pld-bench: wrote {}", file.display());
        }
    }
    Ok(())
}
