//! `pld-daemon`: one rank of a pld cluster.
//!
//! ```text
//! pld-daemon certs --ranks 2 --out certs   # a cluster CA and one certificate per rank
//! pld-daemon --rank 0 --peers 127.0.0.1:7000,127.0.0.1:7001 --tls-dir certs
//! pld-daemon demo            # a 2-rank cluster on loopback, a put, a get, an atomic add
//! pld-daemon ports 4         # four loopback ports free for TCP and UDP
//! ```

mod args;
mod demo;

use anyhow::Context;
use args::RunArgs;
use clap::{Parser, Subcommand};
use pld_daemon::grpc::GrpcServer;
use pld_daemon::metrics;
use pld_server::{Progress, Rank};
use std::io::Write;
use std::sync::Arc;

/// A pld rank daemon: owns its windows and serves one-sided put, get and
/// atomics to its peers over QUIC or TCP.
#[derive(Debug, Parser)]
#[command(
    name = "pld-daemon",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Every flag can also be set through the environment variable shown.\n\
                  Log filtering: RUST_LOG (for example RUST_LOG=debug or RUST_LOG=pld_server=trace).\n\
                  --help shows which flag combinations are refused, and why.",
    after_long_help = args::COMBINATIONS
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
        /// Where to write them: created (mode 0700) if needed; an existing
        /// directory must be yours and writable by no one else, and no file
        /// in it is overwritten (or followed, if a symlink).
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
    /// Print COUNT loopback ports, one a line, free right now for both TCP
    /// and UDP (QUIC), from 20000..32000 — below the kernel's ephemeral
    /// range, so no outgoing connection takes one before a rank binds it.
    /// For scripts and tests that start a cluster on one machine.
    Ports {
        /// How many ports (distinct).
        #[arg(default_value_t = 1)]
        count: usize,
    },
    /// Join the trace files of several ranks (each daemon's --trace FILE)
    /// into one, for one timeline in ui.perfetto.dev.
    TraceMerge {
        /// The joined file.
        #[arg(long)]
        out: std::path::PathBuf,
        /// The ranks' files.
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
    },
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
        Some(
            Command::Demo(_)
            | Command::Certs { .. }
            | Command::Ports { .. }
            | Command::TraceMerge { .. },
        ) => tracing::Level::WARN,
        None => tracing::Level::INFO,
    });
    if let Some(Command::Ports { count }) = &cli.command {
        return ports(*count);
    }
    if let Some(Command::TraceMerge { out, files }) = &cli.command {
        return match trace_merge(out, files) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pld-daemon: error: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
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
            Some(Command::Certs { .. } | Command::Ports { .. } | Command::TraceMerge { .. }) => {
                Ok(())
            }
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

fn ports(count: usize) -> std::process::ExitCode {
    let mut got: Vec<u16> = Vec::with_capacity(count);
    // Each call walks on from the last; one walk of the range at most.
    for _ in 0..12_000 {
        if got.len() == count {
            break;
        }
        match pld_server::transport::free_loopback_port() {
            Ok(p) if got.contains(&p) => {}
            Ok(p) => got.push(p),
            Err(e) => {
                eprintln!("pld-daemon: error: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    if got.len() < count {
        eprintln!(
            "pld-daemon: error: only {} free loopback ports in 20000..32000",
            got.len()
        );
        return std::process::ExitCode::FAILURE;
    }
    for p in got {
        println!("{p}");
    }
    std::process::ExitCode::SUCCESS
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
    args.check_combinations()?;
    pld_server::rlimit::raise_open_files();
    let grpc_opts = args.grpc()?;
    let metrics_addr = args.metrics;
    let trace_file = args.trace.clone();
    if let Some(path) = &trace_file {
        pld_server::trace::check_writable(path)
            .with_context(|| format!("--trace {}: cannot write there", path.display()))?;
    }
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
    let signal = wait_for_signal().await?;
    // Said on stderr whatever the log level: an operator stopping a rank
    // sees it go, in order.
    let t0 = std::time::Instant::now();
    eprintln!("pld-daemon: rank {id} got {signal}: shutting down");
    if let Some(g) = grpc {
        g.shutdown().await;
    }
    rank.shutdown().await;
    if let (Some(path), Some(t)) = (&trace_file, rank.trace()) {
        match std::fs::write(path, t.to_json()) {
            Ok(()) => eprintln!(
                "pld-daemon: rank {id} wrote its trace to {}",
                path.display()
            ),
            Err(e) => eprintln!(
                "pld-daemon: rank {id} could not write its trace to {}: {e}",
                path.display()
            ),
        }
    }
    eprintln!(
        "pld-daemon: rank {id} stopped after {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Stops a background task when the daemon returns.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `trace-merge`: the ranks' trace files as one.
fn trace_merge(out: &std::path::Path, files: &[std::path::PathBuf]) -> anyhow::Result<()> {
    let docs = files
        .iter()
        .map(|f| {
            let text =
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            Ok((f.display().to_string(), text))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Every file whole before anything is written: a truncated or foreign
    // one is refused by name, never merged into a document no viewer reads.
    let merged = pld_server::trace::merge_documents(&docs)?;
    std::fs::write(out, merged).with_context(|| format!("writing {}", out.display()))
}

/// Waits for SIGINT or SIGTERM; which one came.
async fn wait_for_signal() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    Ok(tokio::select! {
        r = tokio::signal::ctrl_c() => {
            r.context("waiting for ctrl-c")?;
            "SIGINT"
        }
        _ = term.recv() => "SIGTERM",
    })
}
