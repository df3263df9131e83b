//! `pld-daemon`: one rank of a pld cluster.
//!
//! ```text
//! pld-daemon certs --ranks 2 --out certs   # a cluster CA and one certificate per rank
//! pld-daemon --rank 0 --peers 127.0.0.1:7000,127.0.0.1:7001 --tls-dir certs
//! pld-daemon demo            # a 2-rank cluster on loopback, a put, a get, an atomic add
//! ```

mod demo;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use pld_server::config::{parse_duration, parse_size};
use pld_server::grpc::{GrpcOptions, GrpcServer};
use pld_server::metrics;
use pld_server::{Config, Progress, Rank, TransportKind, WindowConfig};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A pld rank daemon: owns its windows and serves one-sided put, get and
/// atomics to its peers over QUIC or TCP.
#[derive(Debug, Parser)]
#[command(
    name = "pld-daemon",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Every flag can also be set through the environment variable shown.\n\
                  Log filtering: RUST_LOG (for example RUST_LOG=debug or RUST_LOG=pld_server=trace)."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a 2-rank cluster on loopback (rank 1 as a child pld-daemon),
    /// do a put, a get and an atomic add across it, and print the results.
    Demo(demo::DemoArgs),
    /// Make a cluster CA and one certificate per rank in DIR (ca.pem,
    /// rank-R.pem, rank-R.key) for --tls-dir. The CA's key is not kept.
    Certs {
        /// How many ranks to make certificates for.
        #[arg(long)]
        ranks: u32,
        /// Where to write them (created if needed).
        #[arg(long)]
        out: std::path::PathBuf,
        /// The cluster's name, written into the CA's subject.
        #[arg(long, default_value = "pld")]
        cluster_id: String,
        /// Names (DNS or IP) clients dial the daemons' gRPC ports by: they
        /// go into grpc.pem, the certificate of `--grpc-tls`.
        #[arg(long, value_delimiter = ',', default_value = "localhost,127.0.0.1")]
        grpc_names: Vec<String>,
    },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// This rank's id: its position in --peers.
    #[arg(long, env = "PLD_RANK", required = true)]
    rank: Option<u32>,
    /// HOST:PORT of every rank, in rank order, this rank's own included.
    #[arg(long, env = "PLD_PEERS", value_delimiter = ',', required = true)]
    peers: Vec<String>,
    /// Address to listen on [default: this rank's entry in --peers].
    #[arg(long, env = "PLD_LISTEN")]
    listen: Option<String>,
    /// Peer-plane transport: quic or tcp.
    #[arg(long, env = "PLD_TRANSPORT", default_value = "quic")]
    transport: TransportKind,
    /// A window NAME=SIZE (KiB/MiB/GiB suffixes); repeat for several, or
    /// comma-separate in the variable [default: data=64MiB, signal=64KiB,
    /// collective=16MiB (the scratch of the gRPC collectives)].
    #[arg(long = "window", env = "PLD_WINDOWS", value_delimiter = ',')]
    windows: Vec<WindowConfig>,
    /// Cluster identity: ranks with different ids refuse each other.
    #[arg(long, env = "PLD_CLUSTER_ID", default_value = "pld")]
    cluster_id: String,
    /// How long to keep retrying peers that are not up yet (ms, s, m).
    #[arg(long, env = "PLD_CONNECT_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    connect_timeout: Duration,
    /// How long an op waits for its reply before failing (ms, s, m).
    #[arg(long, env = "PLD_OP_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    op_timeout: Duration,
    /// How long a barrier or a wait may take before it fails with a report
    /// of what is missing (ms, s, m).
    #[arg(long, env = "PLD_SYNC_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    sync_timeout: Duration,
    /// How the rank waits for the network: sleep (kind to shared hosts) or
    /// spin (busy-poll while there is traffic; lowest latency, one core busy).
    #[arg(long, env = "PLD_PROGRESS", default_value = "sleep")]
    progress: Progress,
    /// With --progress spin: back off to sleeping after this long without
    /// traffic (ms, s, m).
    #[arg(long, env = "PLD_SPIN_IDLE", default_value = "20ms", value_parser = parse_duration)]
    spin_idle: Duration,
    /// Largest payload in one peer frame; bigger transfers are split.
    #[arg(long, env = "PLD_MAX_FRAME", default_value = "1MiB", value_parser = parse_size)]
    max_frame: u64,
    /// Serve the gRPC client plane (pld.v1.Pld, health, reflection) on this
    /// address, e.g. 127.0.0.1:50051. Without --client-token it must be a
    /// loopback address.
    #[arg(long, env = "PLD_GRPC")]
    grpc: Option<SocketAddr>,
    /// The bearer token every gRPC call must carry
    /// (`authorization: Bearer TOKEN`). Health checks need none.
    #[arg(long, env = "PLD_CLIENT_TOKEN", hide_env_values = true)]
    client_token: Option<String>,
    /// The most data bytes in one unary gRPC message; larger transfers use
    /// PutStream / GetStream.
    #[arg(long, env = "PLD_GRPC_MAX_MESSAGE", default_value = "4MiB", value_parser = parse_size)]
    grpc_max_message: u64,
    /// Serve Prometheus metrics (per-op counters, latency histograms) at
    /// http://ADDR/metrics.
    #[arg(long, env = "PLD_METRICS")]
    metrics: Option<SocketAddr>,
    /// Mutual TLS between ranks: a directory made by `pld-daemon certs`
    /// (ca.pem, rank-R.pem, rank-R.key). Peers must show a certificate of
    /// that CA naming the rank they claim.
    #[arg(long, env = "PLD_TLS_DIR", conflicts_with = "insecure")]
    tls_dir: Option<std::path::PathBuf>,
    /// Run the peer plane without authentication: anyone who can reach the
    /// port can read and write every window. For trusted networks only.
    #[arg(long, env = "PLD_INSECURE")]
    insecure: bool,
    /// Serve gRPC over TLS with grpc.pem / grpc.key of --tls-dir; clients
    /// verify it with the cluster's ca.pem.
    #[arg(long, env = "PLD_GRPC_TLS", requires = "tls_dir")]
    grpc_tls: bool,
}

impl RunArgs {
    fn grpc(&self) -> anyhow::Result<Option<GrpcOptions>> {
        let Some(addr) = self.grpc else {
            if self.client_token.is_some() {
                anyhow::bail!("--client-token needs --grpc ADDR");
            }
            return Ok(None);
        };
        let mut o = GrpcOptions::new(addr);
        o.token = self.client_token.clone();
        o.max_message_data =
            usize::try_from(self.grpc_max_message).context("--grpc-max-message is too large")?;
        if self.grpc_tls
            && let Some(dir) = &self.tls_dir
        {
            o.tls = Some(pld_server::grpc::GrpcTls::from_dir(dir)?);
        }
        Ok(Some(o))
    }

    fn config(self) -> anyhow::Result<Config> {
        let rank = self.rank.context("--rank is required")?;
        let mut c = Config::new(rank, self.peers);
        c.listen = self.listen;
        c.transport = self.transport;
        if !self.windows.is_empty() {
            c.windows = self.windows;
        }
        c.cluster_id = self.cluster_id;
        c.connect_timeout = self.connect_timeout;
        c.op_timeout = self.op_timeout;
        c.sync_timeout = self.sync_timeout;
        c.progress = match self.progress {
            Progress::Spin { .. } => Progress::Spin {
                idle: self.spin_idle,
            },
            Progress::Sleep => Progress::Sleep,
        };
        c.max_payload = usize::try_from(self.max_frame).context("--max-frame is too large")?;
        c.security = match (self.tls_dir, self.insecure) {
            (Some(dir), _) => pld_server::Security::from_dir(&dir, rank)
                .with_context(|| format!("rank {rank}: TLS material in {}", dir.display()))?,
            (None, true) => pld_server::Security::Insecure,
            // Config::validate refuses it, after the rest of the flags.
            (None, false) => pld_server::Security::Unset,
        };
        Ok(c)
    }
}

fn init_logging(default: tracing::Level) {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::prelude::*;
    let spec = std::env::var("RUST_LOG").unwrap_or_default();
    let filter: Targets = match spec.parse::<Targets>() {
        Ok(f) if !spec.trim().is_empty() => f,
        Ok(_) => Targets::new().with_default(default),
        Err(e) => {
            eprintln!("pld-daemon: RUST_LOG '{spec}' is not a filter ({e}); logging at {default}");
            Targets::new().with_default(default)
        }
    };
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter),
        )
        .init();
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // The demo is a tour: only warnings interrupt it unless RUST_LOG says otherwise.
    init_logging(match cli.command {
        Some(Command::Demo(_) | Command::Certs { .. }) => tracing::Level::WARN,
        None => tracing::Level::INFO,
    });
    if let Some(Command::Certs {
        ranks,
        out,
        cluster_id,
        grpc_names,
    }) = &cli.command
    {
        return match certs(*ranks, out, cluster_id, grpc_names) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pld-daemon: error: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    // A spinning rank keeps one thread busy: it runs on a current-thread
    // runtime (a second worker would only take the core its peers need, and
    // the multi-thread scheduler's bookkeeping costs on every spin).
    let mut rt = if matches!(cli.run.progress, Progress::Spin { .. }) && cli.command.is_none() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let rt = match rt.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pld-daemon: error: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Some(Command::Demo(args)) => demo::run(args).await,
            Some(Command::Certs { .. }) => Ok(()),
            None => serve(cli.run).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pld-daemon: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn certs(
    ranks: u32,
    out: &std::path::Path,
    cluster_id: &str,
    grpc_names: &[String],
) -> anyhow::Result<()> {
    anyhow::ensure!(ranks > 0, "--ranks must be at least 1");
    let ca = pld_server::tls::ClusterCa::generate(cluster_id)?;
    let files = ca.write_dir(out, ranks, grpc_names)?;
    println!(
        "pld-daemon: wrote a cluster CA and certificates for ranks 0..{ranks} ({} files) to {}",
        files.len(),
        out.display()
    );
    println!(
        "pld-daemon: start each rank with --tls-dir {}",
        out.display()
    );
    Ok(())
}

async fn serve(args: RunArgs) -> anyhow::Result<()> {
    let grpc_opts = args.grpc()?;
    let metrics_addr = args.metrics;
    let config = args.config()?;
    let id = config.rank;
    config.validate()?;
    if !config.security.is_tls() {
        let banner = "!".repeat(72);
        eprintln!(
            "{banner}\n\
             pld-daemon: rank {id} runs with --insecure: peers are NOT authenticated.\n\
             Anyone who can reach {} can read and write every window of this rank.\n\
             Use --tls-dir (pld-daemon certs makes one) outside a trusted network.\n\
             {banner}",
            config.listen_addr()
        );
        tracing::warn!(rank = id, "peer plane is unauthenticated (--insecure)");
    }
    // The client plane comes up first, NOT_SERVING, so that probes and
    // clients can reach the daemon while it connects to its peers.
    let grpc = match grpc_opts {
        Some(o) => {
            let g = GrpcServer::start(o, &config)
                .await
                .with_context(|| format!("rank {id} cannot serve gRPC"))?;
            println!(
                "pld-daemon: rank {id} gRPC on {} (NOT_SERVING until the mesh is up)",
                g.local_addr()
            );
            Some(g)
        }
        None => None,
    };
    let sources = Arc::new(metrics::Sources {
        rank_id: id,
        rank: Default::default(),
        grpc: grpc.as_ref().map(GrpcServer::metrics),
    });
    let _metrics = match metrics_addr {
        Some(addr) => {
            let (local, task) = metrics::serve(addr, sources.clone())
                .await
                .with_context(|| format!("rank {id} cannot serve metrics"))?;
            println!("pld-daemon: rank {id} metrics on http://{local}/metrics");
            Some(AbortOnDrop(task))
        }
        None => None,
    };
    std::io::stdout().flush()?;
    let rank = Arc::new(
        Rank::start(config)
            .await
            .with_context(|| format!("rank {id} cannot serve"))?,
    );
    let _ = sources.rank.set(rank.clone());
    if let Some(g) = &grpc {
        g.ready(rank.clone()).await;
    }
    // The ready line is the contract with scripts and tests: it is printed
    // once every peer is connected and the rank serves.
    println!(
        "pld-daemon: rank {} of {} ready on {} ({}, epoch {})",
        rank.rank(),
        rank.nranks(),
        rank.local_addr(),
        rank.transport(),
        rank.epoch()
    );
    std::io::stdout().flush()?;
    wait_for_signal().await?;
    tracing::info!(rank = rank.rank(), "shutting down");
    if let Some(g) = grpc {
        g.shutdown().await;
    }
    rank.shutdown().await;
    Ok(())
}

/// Stops a background task when the daemon returns.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for ctrl-c")?,
        _ = term.recv() => {}
    }
    Ok(())
}
