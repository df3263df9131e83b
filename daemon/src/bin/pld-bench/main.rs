//! `pld-bench`: pld's micro-benchmarks in the style of the OSU suite, with
//! the transport's raw floor and (optionally) Open MPI measured in the same
//! run, and every figure given as a ratio of them.
//!
//! ```text
//! pld-bench all --transport tcp --progress spin            # a table
//! pld-bench all --transport quic --json                    # JSON lines
//! pld-bench put_lat get_bw --sizes 8,4MiB --mpi ../shared/bench/mpi-rma/run.sh
//! pld-bench grpc                                           # the client plane
//! ```
//! By default it starts its own target: a `pld-daemon` (rank 1) next to
//! this binary; rank 0 runs in this process. `grpc` starts two daemons per
//! transport and progress mode and times gRPC calls against them instead.

mod crypto;
mod grpc;
mod measure;
mod raw;
mod report;
mod scale;

use anyhow::{Context, bail};
use clap::Parser;
use pld_server::config::{parse_duration, parse_size};
use pld_server::transport::free_loopback_port;
use pld_server::{Config, Progress, Rank, TransportKind};
use report::{Baselines, Figure};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BENCHES: [&str; 14] = [
    "crypto_floor",
    "raw_rtt",
    "raw_bw",
    "put_lat",
    "get_lat",
    "acc_lat",
    "fetch_add_lat",
    "put_bw",
    "get_bw",
    "bibw",
    "msg_rate",
    "acc_rate",
    "barrier_lat",
    "peak_mem",
];
/// Benchmarks that `all` does not include: `grpc` starts daemons of every
/// transport and progress mode itself, whatever the flags say; `scale`
/// starts `--ranks` processes (meant for 16, 32, 64).
const EXTRA: [&str; 2] = ["grpc", "scale"];

/// pld's micro-benchmarks: latency, bandwidth, message rate and barrier
/// latency, next to the raw floor of the transport measured in the same run.
#[derive(Debug, Parser)]
#[command(name = "pld-bench", version)]
struct Cli {
    /// What to measure: `all`, or any of raw_rtt raw_bw put_lat get_lat
    /// acc_lat fetch_add_lat put_bw get_bw bibw msg_rate acc_rate barrier_lat
    /// peak_mem crypto_floor; or `grpc`: the client plane's unary 8 B calls (health
    /// Check, Put and Get to the own and a remote rank) over both transports
    /// and both progress modes, each as a ratio of the Check; or `scale`:
    /// `--ranks` processes (16,32,64) — time to form the cluster, memory
    /// per rank, barrier and all-reduce latency.
    #[arg(default_value = "all")]
    benches: Vec<String>,
    /// Peer-plane transport: quic or tcp.
    #[arg(long, default_value = "quic")]
    transport: TransportKind,
    /// sleep, or spin (busy-poll on origin and target).
    #[arg(long, default_value = "sleep")]
    progress: Progress,
    /// With --progress spin: back off after this long without traffic.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    spin_idle: Duration,
    /// Run every rank with the race detector (`--checked`): its cost.
    #[arg(long, num_args = 0..=1, default_missing_value = "on", default_value = "off")]
    checked: pld_server::CheckedMode,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Message sizes (KiB/MiB suffixes), comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_size,
          default_value = "8,64,512,4096,65536,1MiB,4MiB,16MiB,64MiB")]
    sizes: Vec<u64>,
    /// Rank counts for barrier_lat and scale, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8")]
    ranks: Vec<u32>,
    /// Run the target rank in this process (on its own thread) instead of
    /// starting a pld-daemon.
    #[arg(long)]
    in_process: bool,
    /// Join a running cluster instead: every rank's HOST:PORT in rank order.
    #[arg(long, value_delimiter = ',')]
    peers: Vec<String>,
    /// With --peers: this process's rank.
    #[arg(long, default_value_t = 0)]
    rank: u32,
    /// With --peers: the rank to measure against.
    #[arg(long, default_value_t = 1)]
    target: u32,
    /// Open MPI's one-sided benchmark script (../shared/bench/mpi-rma/run.sh):
    /// run it in the same run and print pld / MPI ratios.
    #[arg(long)]
    mpi: Option<PathBuf>,
    /// A tenth of the iterations: a smoke run.
    #[arg(long)]
    quick: bool,
    /// Puts in flight before each `quiet` in msg_rate (OSU's window size).
    /// Other than 64, the figures are named `msg_rate_w<N>` and
    /// `msg_rate_nb_w<N>`: a sweep splits a window's time into its fixed
    /// part (one round trip) and the cost per op. (MPI's message rate is
    /// its 8 B `put_bw`, a window of 64.)
    #[arg(long, default_value_t = measure::WINDOW as u16, value_parser = clap::value_parser!(u16).range(1..))]
    window: u16,
    /// Mutual TLS between the benchmark's ranks, with this material (made
    /// by `pld-daemon certs`). Without it the peer plane runs --insecure,
    /// as MPI does: QUIC still encrypts, TCP is plaintext.
    #[arg(long)]
    tls_dir: Option<PathBuf>,
    /// With `grpc`: also time the calls from Python, with this interpreter
    /// (one that has `pld-client` installed, e.g. target/venv/bin/python).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Internal: run as a helper process (raw-server, barrier-rank).
    #[arg(long, hide = true)]
    internal: Option<String>,
    #[arg(long, hide = true)]
    listen: Option<SocketAddr>,
    #[arg(long, hide = true, default_value = "tokio")]
    raw_impl: String,
    #[arg(long, hide = true, default_value_t = 0)]
    iters: usize,
}

impl Cli {
    fn progress(&self) -> Progress {
        self.progress.with_spin_idle(self.spin_idle)
    }
    fn wants(&self, b: &str) -> bool {
        self.benches
            .iter()
            .any(|x| x == b || (x == "all" && !EXTRA.contains(&b)))
    }
}

/// Windows of the benchmark cluster: room for a 64 MiB put and a 64 MiB get
/// side by side (bibw).
const WINDOWS: [&str; 2] = ["data=136MiB", "signal=64KiB"];
const BARRIER_WINDOWS: [&str; 1] = ["data=64KiB"];

fn config(rank: u32, peers: &[String], cli: &Cli, windows: &[&str]) -> anyhow::Result<Config> {
    let mut c = Config::new(rank, peers.to_vec());
    c.transport = cli.transport;
    c.progress = cli.progress();
    c.checked = cli.checked;
    c.windows = windows
        .iter()
        .map(|w| w.parse())
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    c.connect_timeout = Duration::from_secs(30);
    c.op_timeout = Duration::from_secs(60);
    c.sync_timeout = Duration::from_secs(120);
    c.security = match &cli.tls_dir {
        Some(dir) => pld_server::Security::from_dir(dir, rank)?,
        None => pld_server::Security::Insecure,
    };
    Ok(c)
}

fn loopback(n: usize) -> anyhow::Result<Vec<String>> {
    (0..n)
        .map(|_| Ok(format!("127.0.0.1:{}", free_loopback_port()?)))
        .collect()
}

/// A child process, killed when dropped.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// Waits for the child's first stdout line (its ready line).
    fn ready(&mut self) -> anyhow::Result<String> {
        let out = self.0.stdout.take().context("child stdout")?;
        Self::read_ready(out)
    }

    /// The first line of a child's stdout (its ready line); blocks.
    fn read_ready(out: std::process::ChildStdout) -> anyhow::Result<String> {
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line)?;
        if line.is_empty() {
            bail!("the child exited before it was ready");
        }
        Ok(line)
    }
}

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let p = me.with_file_name(name);
    if !p.exists() {
        bail!(
            "{} not found next to pld-bench: build it first (cargo build --release -p pld-server)",
            p.display()
        );
    }
    Ok(p)
}

fn me_as(cli: &Cli, internal: &str) -> anyhow::Result<Command> {
    let mut c = Command::new(std::env::current_exe()?);
    c.args([
        "--internal",
        internal,
        "--transport",
        &cli.transport.to_string(),
    ])
    .args(["--progress", &cli.progress.to_string()])
    .args(["--spin-idle", &format!("{}ms", cli.spin_idle.as_millis())])
    .arg(format!("--checked={}", cli.checked))
    .stdout(Stdio::piped());
    if let Some(dir) = &cli.tls_dir {
        c.arg("--tls-dir").arg(dir);
    }
    Ok(c)
}

/// A memory figure of a process's `/proc/PID/status` (`VmHWM:` peak
/// resident, `VmRSS:` resident), in MiB.
fn status_mib(pid: u32, field: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = s
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

fn peak_mem(pid: u32) -> Option<f64> {
    status_mib(pid, "VmHWM:")
}

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
    if let Some(script) = &cli.mpi {
        base.mpi = mpi(script, cli)?;
    }
    report::print(
        &figs,
        &base,
        &cli.transport.to_string(),
        &cli.progress.to_string(),
        cli.json,
    );
    Ok(())
}

/// Runs Open MPI's one-sided benchmark (and its barrier at each rank count).
fn mpi(script: &PathBuf, cli: &Cli) -> anyhow::Result<HashMap<(String, u64), f64>> {
    let mut all = HashMap::new();
    let run = |args: &[String]| -> anyhow::Result<String> {
        let out = Command::new(script)
            .args(args)
            .output()
            .context("running the MPI benchmark")?;
        if !out.status.success() {
            bail!(
                "{} failed: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    all.extend(report::parse_mpi(&run(&[])?));
    if cli.wants("barrier_lat") || cli.wants("scale") {
        for p in &cli.ranks {
            all.extend(report::parse_mpi(&run(&["barrier".into(), p.to_string()])?));
        }
    }
    Ok(all)
}
