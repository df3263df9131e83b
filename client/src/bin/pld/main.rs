//! `pld`: the command line of a pld daemon's client plane.
//!
//! ```text
//! pld --daemon 127.0.0.1:50051 info
//! pld put --rank 1 --window data --offset 0 weights.bin
//! pld get --rank 1 --window data --offset 0 --len 256MiB > back.bin
//! pld add --rank 0 --window data --dtype fp32 ones.f32
//! pld barrier
//! pld stats
//! ```

mod progress;

use anyhow::Context;
use clap::{Parser, Subcommand};
use pld_client::{Client, ClientOptions, Code, Dtype, Error};
use pld_proto::units::{parse_duration, parse_size};
use std::io::Write;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Talk to a pld daemon over gRPC: inspect it, move data into and out of any
/// rank's window, enter a barrier, read its counters.
#[derive(Debug, Parser)]
#[command(name = "pld", version)]
struct Cli {
    /// The daemon's gRPC address (pld-daemon --grpc).
    #[arg(
        long,
        env = "PLD_DAEMON",
        default_value = "127.0.0.1:50051",
        global = true
    )]
    daemon: String,
    /// The daemon's client token, if it has one.
    #[arg(long, env = "PLD_CLIENT_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// Talk TLS to the daemon (pld-daemon --grpc-tls), trusting this CA
    /// certificate (the cluster's ca.pem).
    #[arg(long, env = "PLD_TLS_CA", global = true)]
    tls_ca: Option<String>,
    /// The name the daemon's certificate must carry [default: the host of
    /// --daemon].
    #[arg(long, env = "PLD_TLS_DOMAIN", global = true)]
    tls_domain: Option<String>,
    /// How long to wait for a daemon that is not up or not ready yet.
    #[arg(long, default_value = "10s", value_parser = parse_duration, global = true)]
    wait: Duration,
    /// Draw a progress bar for transfers over 4 MiB.
    #[arg(long, value_enum, default_value = "auto", global = true)]
    progress: progress::When,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The daemon's rank, the cluster's size, windows and transport.
    Info,
    /// Write a file (or stdin: -) into a rank's window.
    Put {
        #[command(flatten)]
        at: At,
        /// The file to write, or - for stdin.
        file: String,
    },
    /// Read bytes from a rank's window to stdout (or --output).
    Get {
        #[command(flatten)]
        at: At,
        /// How many bytes (KiB/MiB/GiB suffixes).
        #[arg(long, value_parser = parse_size)]
        len: u64,
        /// Write here instead of stdout.
        #[arg(short, long)]
        output: Option<String>,
    },
    /// Add a file's elements (little-endian) into a rank's window,
    /// elementwise and atomically.
    Add {
        #[command(flatten)]
        at: At,
        /// fp32 fp16 bf16 int32 int16 int8 int64 fp64.
        #[arg(long, value_parser = parse_dtype)]
        dtype: Dtype,
        /// The operands, or - for stdin.
        file: String,
    },
    /// Enter a barrier as the daemon's rank.
    Barrier {
        /// At most this long (0: the daemon's sync timeout).
        #[arg(long, default_value = "0s", value_parser = parse_duration)]
        timeout: Duration,
    },
    /// The daemon's counters (non-zero ones).
    Stats {
        /// Every counter, zeros included.
        #[arg(long)]
        all: bool,
    },
}

/// Where in the cluster.
#[derive(Debug, clap::Args)]
struct At {
    /// The target rank.
    #[arg(long)]
    rank: u32,
    /// The window's name.
    #[arg(long, default_value = "data")]
    window: String,
    /// Byte offset into the window (KiB/MiB/GiB suffixes).
    #[arg(long, default_value = "0", value_parser = parse_size)]
    offset: u64,
}

fn parse_dtype(s: &str) -> Result<Dtype, String> {
    Dtype::parse(s).ok_or_else(|| {
        format!("unknown dtype '{s}': use fp32 fp16 bf16 int32 int16 int8 int64 fp64")
    })
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pld: error: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pld: error: {e:#}");
            if let Some(hint) = e.downcast_ref::<Error>().and_then(hint) {
                eprintln!("pld: hint: {hint}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// What to try next, for the errors people meet first.
fn hint(e: &Error) -> Option<&'static str> {
    match e.code() {
        Code::Unavailable => Some(
            "is the daemon running with --grpc at this address, and are all its peers up? (pld --daemon HOST:PORT)",
        ),
        Code::Unauthenticated => Some("pass the daemon's token with --token or PLD_CLIENT_TOKEN"),
        Code::NotFound => Some("`pld info` lists the ranks and windows"),
        Code::OutOfRange => Some("`pld info` shows each window's size"),
        _ => None,
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let tls_ca = match &cli.tls_ca {
        Some(p) => Some(std::fs::read(p).with_context(|| format!("reading --tls-ca {p}"))?),
        None => None,
    };
    let opts = ClientOptions {
        token: cli.token.clone(),
        wait_ready: cli.wait,
        tls_ca,
        tls_domain: cli.tls_domain.clone(),
    };
    let client = Client::connect_with(&cli.daemon, opts).await?;
    let when = cli.progress;
    match cli.command {
        Command::Info => {
            let i = client.info();
            println!("rank {} of {}", i.rank, i.nranks);
            println!("cluster   {}", i.cluster_id);
            println!("transport {}", i.transport);
            println!("version   {} (protocol {})", i.version, i.protocol_version);
            println!("ready     {}", i.ready);
            println!("checked   {}", i.checked);
            println!(
                "messages  up to {} data bytes (larger transfers stream)",
                i.max_message_data
            );
            println!("windows:");
            for w in &i.windows {
                println!("  {:<12} {:>14} bytes", w.name, w.size);
            }
        }
        Command::Put { at, file } => {
            let win = client.window(&at.window)?;
            if file == "-" {
                let mut data = Vec::new();
                tokio::io::stdin()
                    .read_to_end(&mut data)
                    .await
                    .context("reading stdin")?;
                client.put(at.rank, win, at.offset, &data).await?;
                eprintln!(
                    "pld: put {} bytes at offset {} of rank {}'s window '{}'",
                    data.len(),
                    at.offset,
                    at.rank,
                    at.window
                );
            } else {
                let f = tokio::fs::File::open(&file)
                    .await
                    .with_context(|| format!("opening {file}"))?;
                let len = f
                    .metadata()
                    .await
                    .with_context(|| format!("reading {file}"))?
                    .len();
                let bar = progress::Bar::start("put", len, when);
                let r = client
                    .put_from_reader(
                        at.rank,
                        win,
                        at.offset,
                        len,
                        tokio::io::BufReader::new(f),
                        Some(bar.counter()),
                    )
                    .await;
                bar.finish();
                r?;
                eprintln!(
                    "pld: put {len} bytes of {file} at offset {} of rank {}'s window '{}'",
                    at.offset, at.rank, at.window
                );
            }
        }
        Command::Get { at, len, output } => {
            let win = client.window(&at.window)?;
            let bar = progress::Bar::start("get", len, when);
            let r = match &output {
                Some(path) => {
                    let f = tokio::fs::File::create(path)
                        .await
                        .with_context(|| format!("creating {path}"))?;
                    client
                        .get_to_writer(
                            at.rank,
                            win,
                            at.offset,
                            len,
                            tokio::io::BufWriter::new(f),
                            Some(bar.counter()),
                        )
                        .await
                }
                None => {
                    client
                        .get_to_writer(
                            at.rank,
                            win,
                            at.offset,
                            len,
                            tokio::io::stdout(),
                            Some(bar.counter()),
                        )
                        .await
                }
            };
            bar.finish();
            r?;
        }
        Command::Add { at, dtype, file } => {
            let win = client.window(&at.window)?;
            let data = if file == "-" {
                let mut d = Vec::new();
                tokio::io::stdin()
                    .read_to_end(&mut d)
                    .await
                    .context("reading stdin")?;
                d
            } else {
                tokio::fs::read(&file)
                    .await
                    .with_context(|| format!("reading {file}"))?
            };
            client
                .atomic_add(at.rank, win, at.offset, dtype, &data)
                .await?;
            eprintln!(
                "pld: added {} {dtype} elements at offset {} of rank {}'s window '{}'",
                data.len() / dtype.size().max(1),
                at.offset,
                at.rank,
                at.window
            );
        }
        Command::Barrier { timeout } => {
            let t0 = std::time::Instant::now();
            client.barrier_within(timeout).await?;
            eprintln!(
                "pld: rank {} left the barrier after {:?}",
                client.rank(),
                t0.elapsed()
            );
        }
        Command::Stats { all } => {
            let s = client.stats().await?;
            let mut out = std::io::stdout().lock();
            for c in s.counters.iter().filter(|c| all || c.value != 0) {
                if c.kind.is_empty() {
                    writeln!(out, "{:<20} {:>14}", c.name, c.value)?;
                } else {
                    writeln!(out, "{:<20} {:<14} {:>14}", c.name, c.kind, c.value)?;
                }
            }
        }
    }
    Ok(())
}
