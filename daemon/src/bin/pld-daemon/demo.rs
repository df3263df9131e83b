//! `pld-daemon demo`: the two-command tour. Starts rank 1 as a child
//! `pld-daemon` process on loopback, embeds rank 0, and moves data across.

use anyhow::{Context, bail};
use clap::Args;
use half::bf16;
use pld_server::tls::TempTlsDir;
use pld_server::transport::free_loopback_port;
use pld_server::{Config, Dtype, NotifyOp, Rank, TransportKind};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Peer-plane transport: quic or tcp.
    #[arg(long, default_value = "quic")]
    transport: TransportKind,
}

/// Kills the child daemon however the demo ends.
struct ChildGuard(Child);
impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let peers = vec![
        format!("127.0.0.1:{}", free_loopback_port()?),
        format!("127.0.0.1:{}", free_loopback_port()?),
    ];
    // A throwaway cluster CA: the two ranks authenticate each other.
    let tls = TempTlsDir::new(2)?;
    let exe = std::env::current_exe().context("locating pld-daemon")?;
    let mut child = ChildGuard(
        Command::new(exe)
            .args(["--rank", "1", "--peers", &peers.join(","), "--transport"])
            .arg(args.transport.to_string())
            .arg("--tls-dir")
            .arg(tls.path())
            .args(["--window", "data=1MiB", "--window", "signal=4KiB"])
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::piped())
            .spawn()
            .context("starting rank 1")?,
    );
    println!(
        "pld demo: 2 ranks on loopback over {} with mutual TLS (a throwaway CA): rank 0 in this process, rank 1 is pld-daemon (pid {})",
        args.transport,
        child.0.id()
    );
    let mut config = Config::new(0, peers);
    config.transport = args.transport;
    config.windows = ["data=1MiB", "signal=4KiB"]
        .into_iter()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(anyhow::Error::msg)?;
    config.connect_timeout = Duration::from_secs(20);
    config.security = tls.security(0)?;
    let rank = Rank::start(config).await?;
    // Rank 1 prints its ready line once it is connected too.
    let stdout = child.0.stdout.take().context("rank 1 stdout")?;
    let ready =
        tokio::task::spawn_blocking(move || BufReader::new(stdout).lines().next().transpose())
            .await??
            .unwrap_or_default();
    println!("  {ready}");

    let data = rank.window("data")?;
    let signal = rank.window("signal")?;
    let message = b"hello from rank 0";

    let t = Instant::now();
    rank.put(1, data, 0, message).await?;
    println!(
        "  put         rank 0 -> rank 1  data[0..{}] = {:?}  ({:.0?})",
        message.len(),
        String::from_utf8_lossy(message),
        t.elapsed()
    );

    let t = Instant::now();
    let back = rank.get(1, data, 0, message.len() as u64).await?;
    println!(
        "  get         rank 0 <- rank 1  data[0..{}] = {:?}  ({:.0?})",
        back.len(),
        String::from_utf8_lossy(&back),
        t.elapsed()
    );
    if back[..] != message[..] {
        bail!("get returned {back:?}, expected {message:?}");
    }

    let ones = [1.5f32, 2.5, 3.5, 4.5];
    let t = Instant::now();
    rank.atomic_add_elems(1, data, 64, &ones).await?;
    rank.atomic_add_elems(1, data, 64, &ones).await?;
    let sums: Vec<f32> = pld_proto_from(&rank.get(1, data, 64, 16).await?);
    println!(
        "  atomic_add  rank 0 -> rank 1  fp32 {ones:?} twice -> {sums:?}  ({:.0?})",
        t.elapsed()
    );
    if sums != [3.0, 5.0, 7.0, 9.0] {
        bail!("atomic add gave {sums:?}");
    }

    let halves = [bf16::from_f32(0.5); 4];
    rank.atomic_add_elems(1, data, 128, &halves).await?;
    let b: Vec<bf16> = pld_proto_from(&rank.get(1, data, 128, 8).await?);
    println!(
        "  atomic_add  rank 0 -> rank 1  bf16 [0.5; 4] -> {:?}",
        b.iter().map(|x| x.to_f32()).collect::<Vec<_>>()
    );

    let before = rank.fetch_add(1, data, 256, Dtype::Int64, 42).await?;
    let after = rank.fetch_add(1, data, 256, Dtype::Int64, 0).await?;
    println!("  fetch_add   rank 0 -> rank 1  int64 +42: {before} -> {after}");

    rank.notify(1, signal, 0, 1, NotifyOp::AtomicAdd).await?;
    let s = rank.get(1, signal, 0, 4).await?;
    println!(
        "  notify      rank 0 -> rank 1  signal[0] += 1 -> {}",
        i32::from_le_bytes([s[0], s[1], s[2], s[3]])
    );

    let st = rank.stats();
    println!(
        "  rank 0 sent {} bytes and received {} bytes on the peer plane",
        st.bytes_sent, st.bytes_received
    );
    rank.shutdown().await;
    drop(child);
    println!("OK");
    Ok(())
}

fn pld_proto_from<T: pld_server::Element>(b: &[u8]) -> Vec<T> {
    b.chunks_exact(T::DTYPE.size()).map(T::read_le).collect()
}
