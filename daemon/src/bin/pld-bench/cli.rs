//! `pld-bench`'s command line, the benchmarks it knows, and the rank
//! configuration it derives from them.

use crate::measure;
use clap::Parser;
use pld_server::config::{parse_duration, parse_size};
use pld_server::transport::free_loopback_port;
use pld_server::{Config, Progress, TransportKind};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub(crate) const BENCHES: [&str; 15] = [
    "crypto_floor",
    "raw_rtt",
    "raw_bw",
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
    "barrier_lat",
    "peak_mem",
];
/// Benchmarks that `all` does not include: `grpc` starts daemons of every
/// transport and progress mode itself, whatever the flags say; `scale`
/// starts `--ranks` processes (meant for 16, 32, 64).
pub(crate) const EXTRA: [&str; 2] = ["grpc", "scale"];

/// pld's micro-benchmarks: latency, bandwidth, message rate and barrier
/// latency, next to the raw floor of the transport measured in the same run.
#[derive(Debug, Parser)]
#[command(name = "pld-bench", version)]
pub(crate) struct Cli {
    /// What to measure: `all`, or any of raw_rtt raw_bw put_lat get_lat
    /// acc_lat fetch_add_lat cas_lat put_bw get_bw bibw msg_rate acc_rate barrier_lat
    /// peak_mem crypto_floor; or `grpc`: the client plane's unary 8 B calls (health
    /// Check, Put and Get to the own and a remote rank) over both transports
    /// and both progress modes, each as a ratio of the Check; or `scale`:
    /// `--ranks` processes (16,32,64) — time to form the cluster, memory
    /// per rank, barrier and all-reduce latency.
    #[arg(default_value = "all")]
    pub(crate) benches: Vec<String>,
    /// Peer-plane transport: quic or tcp.
    #[arg(long, default_value = "quic")]
    pub(crate) transport: TransportKind,
    /// sleep, or spin (busy-poll on origin and target).
    #[arg(long, default_value = "sleep")]
    pub(crate) progress: Progress,
    /// With --progress spin: back off after this long without traffic.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    pub(crate) spin_idle: Duration,
    /// Run every rank with the race detector (`--checked`): its cost.
    #[arg(long, num_args = 0..=1, default_missing_value = "on", default_value = "off")]
    pub(crate) checked: pld_server::CheckedMode,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Message sizes (KiB/MiB suffixes), comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_size,
          default_value = "8,64,512,4096,65536,1MiB,4MiB,16MiB,64MiB")]
    pub(crate) sizes: Vec<u64>,
    /// Rank counts for barrier_lat and scale, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8")]
    pub(crate) ranks: Vec<u32>,
    /// Run the target rank in this process (on its own thread) instead of
    /// starting a pld-daemon.
    #[arg(long)]
    pub(crate) in_process: bool,
    /// Join a running cluster instead: every rank's HOST:PORT in rank order.
    #[arg(long, value_delimiter = ',')]
    pub(crate) peers: Vec<String>,
    /// With --peers: this process's rank.
    #[arg(long, default_value_t = 0)]
    pub(crate) rank: u32,
    /// With --peers: the rank to measure against.
    #[arg(long, default_value_t = 1)]
    pub(crate) target: u32,
    /// Also measure MPI one-sided RMA (our daemon/bench/mpi_rma.c, built
    /// with Open MPI's mpicc, run with mpirun over TCP on loopback) in the
    /// same run and print pld / MPI ratios; installs Open MPI with apt-get
    /// if it is missing and it can.
    #[arg(long)]
    pub(crate) mpi: bool,
    /// Also draw latency and bandwidth against message size, pld beside
    /// this run's baselines (raw transport, MPI), as DIR/latency.svg,
    /// .png and DIR/bandwidth.svg, .png.
    #[arg(long, value_name = "DIR")]
    pub(crate) plot: Option<PathBuf>,
    /// A tenth of the iterations: a smoke run.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Puts in flight before each `quiet` in msg_rate (OSU's window size).
    /// Other than 64, the figures are named `msg_rate_w<N>` and
    /// `msg_rate_nb_w<N>`: a sweep splits a window's time into its fixed
    /// part (one round trip) and the cost per op. (MPI's message rate is
    /// its 8 B `put_bw`, a window of 64.)
    #[arg(long, default_value_t = measure::WINDOW as u16, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) window: u16,
    /// Mutual TLS between the benchmark's ranks, with this material (made
    /// by `pld-daemon certs`). Without it the peer plane runs --insecure,
    /// as MPI does: QUIC still encrypts, TCP is plaintext.
    #[arg(long)]
    pub(crate) tls_dir: Option<PathBuf>,
    /// With `grpc`: also time the calls from Python, with this interpreter
    /// (one that has `pld-client` installed, e.g. target/venv/bin/python).
    #[arg(long)]
    pub(crate) python: Option<PathBuf>,
    /// Internal: run as a helper process (raw-server, barrier-rank).
    #[arg(long, hide = true)]
    pub(crate) internal: Option<String>,
    #[arg(long, hide = true)]
    pub(crate) listen: Option<SocketAddr>,
    #[arg(long, hide = true, default_value = "tokio")]
    pub(crate) raw_impl: String,
    #[arg(long, hide = true, default_value_t = 0)]
    pub(crate) iters: usize,
}

impl Cli {
    pub(crate) fn progress(&self) -> Progress {
        self.progress.with_spin_idle(self.spin_idle)
    }
    pub(crate) fn wants(&self, b: &str) -> bool {
        self.benches
            .iter()
            .any(|x| x == b || (x == "all" && !EXTRA.contains(&b)))
    }
}

/// Windows of the benchmark cluster: room for a 64 MiB put and a 64 MiB get
/// side by side (bibw).
pub(crate) const WINDOWS: [&str; 2] = ["data=136MiB", "signal=64KiB"];
pub(crate) const BARRIER_WINDOWS: [&str; 1] = ["data=64KiB"];

pub(crate) fn config(
    rank: u32,
    peers: &[String],
    cli: &Cli,
    windows: &[&str],
) -> anyhow::Result<Config> {
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

pub(crate) fn loopback(n: usize) -> anyhow::Result<Vec<String>> {
    (0..n)
        .map(|_| Ok(format!("127.0.0.1:{}", free_loopback_port()?)))
        .collect()
}
