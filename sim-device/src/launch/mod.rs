//! The launcher: `-p a2a3sim|a5sim -d 0,1[,...] [--mode M]` starts one rank
//! per device id — in this process over real loopback sockets by default,
//! or as clients of running daemons with `--daemons ADDR,...` — runs the
//! program's kernel on every rank at once, checks each rank's result
//! against its golden and prints `OK`, or the largest difference and fails.

use crate::device::{Device, Symmetry};
use crate::error::{Error, Result};
use crate::plan::Planner;
use crate::tensor::{Profile, Shape2, Tensor};
use clap::Parser;
use pld_proto::Rma;
use pld_proto::Scalar;
use pld_server::{CheckedMode, Config, Rank, TransportKind, WindowConfig};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The command line every example takes.
#[derive(Debug, Clone, Parser)]
#[command(about = "A pld tutorial program: runs its kernel on every rank and checks the golden")]
pub struct Args {
    /// The device profile: a2a3sim (184 KiB on chip) or a5sim (240 KiB).
    #[arg(short = 'p', long = "platform", default_value = "a2a3sim")]
    pub platform: String,
    /// Device ids, one rank each, in rank order.
    #[arg(
        short = 'd',
        long = "devices",
        value_delimiter = ',',
        default_value = "0,1"
    )]
    pub devices: Vec<u32>,
    /// The program's mode, where it has modes.
    #[arg(long)]
    pub mode: Option<String>,
    /// Use the built-in primitive instead of the hand-rolled one.
    #[arg(long)]
    pub use_builtin: bool,
    /// Run against these daemons' gRPC addresses, in rank order, instead
    /// of in-process ranks.
    #[arg(long, value_delimiter = ',')]
    pub daemons: Vec<String>,
    /// The peer transport of in-process ranks.
    #[arg(long, default_value = "quic")]
    pub transport: String,
    /// How long a barrier or wait may take before it fails with a report.
    #[arg(long, default_value = "30s")]
    pub timeout: String,
    /// The daemons' client token, if they have one.
    #[arg(long, env = "PLD_CLIENT_TOKEN")]
    pub token: Option<String>,
    /// Print what each rank would send, without running anything.
    #[arg(long)]
    pub compile_only: bool,
    /// Run every rank as a race detector and fail, printing each race
    /// once, if any access was unordered (`--checked=strict` also fails
    /// the racing op). In-process ranks only; daemons take the flag
    /// themselves.
    #[arg(long, num_args = 0..=1, default_missing_value = "on", default_value = "off")]
    pub checked: CheckedMode,
}

impl Args {
    /// The mode, checked against `allowed`; the first is the default.
    pub fn mode(&self, allowed: &[&str]) -> Result<String> {
        let m = self.mode.clone().unwrap_or_else(|| allowed[0].to_string());
        if allowed.contains(&m.as_str()) {
            Ok(m)
        } else {
            Err(Error::Usage(format!(
                "--mode {m} is not one of {}",
                allowed.join(", ")
            )))
        }
    }
    /// Whether the hand-rolled (`hand`, the default) or the builtin form
    /// runs: `--mode hand|builtin` as the tutorial's steps 12–15 spell it,
    /// or `--use-builtin` as step 04 does.
    pub fn builtin(&self) -> Result<bool> {
        if self.use_builtin {
            return Ok(true);
        }
        Ok(self.mode(&["hand", "builtin"])? == "builtin")
    }
    /// The number of ranks.
    pub fn nranks(&self) -> u32 {
        if self.daemons.is_empty() {
            self.devices.len() as u32
        } else {
            self.daemons.len() as u32
        }
    }
}

/// How a rank's result compares with its golden.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Check {
    /// The largest absolute difference, and where: (element, got, want).
    pub worst: Option<(usize, f64, f64)>,
    /// The largest absolute difference (NaN if any value is NaN).
    pub max_diff: f64,
    /// What counts as equal.
    pub tol: f64,
}

impl Check {
    /// `got` must equal `want` exactly.
    pub fn exact<T: Scalar>(got: &[T], want: &[T]) -> Check {
        Check::close(got, want, 0.0)
    }

    /// `|got − want| ≤ tol · max(1, |want|)` elementwise (allclose).
    pub fn close<T: Scalar>(got: &[T], want: &[T], tol: f64) -> Check {
        let mut c = Check {
            tol,
            ..Check::default()
        };
        if got.len() != want.len() {
            c.max_diff = f64::INFINITY;
            c.worst = Some((
                got.len().min(want.len()),
                got.len() as f64,
                want.len() as f64,
            ));
            return c;
        }
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let (g, w) = (g.to_f64(), w.to_f64());
            let d = (g - w).abs() / w.abs().max(1.0);
            if d > c.max_diff || (d.is_nan() && !c.max_diff.is_nan()) {
                c.max_diff = d;
                c.worst = Some((i, g, w));
            }
        }
        c
    }

    /// Both must pass.
    pub fn and(self, other: Check) -> Check {
        if other.failed() && !self.failed() || other.max_diff > self.max_diff {
            other
        } else {
            self
        }
    }

    /// Whether the difference exceeds the tolerance (or is NaN).
    pub fn failed(&self) -> bool {
        self.max_diff.is_nan() || self.max_diff > self.tol
    }
}

/// A tutorial program: a kernel that runs on every rank.
pub trait Program: Send + Sync + 'static {
    /// Window sizes in bytes the program needs (every rank has them).
    fn windows(&self) -> Vec<(String, u64)> {
        vec![("data".into(), 4 << 20), ("signal".into(), 64 << 10)]
    }
    /// Runs the kernel on one rank and checks its golden.
    fn run<R: Rma + 'static>(
        &self,
        dev: Arc<Device<R>>,
    ) -> impl Future<Output = Result<Check>> + Send;
}

/// Deterministic input of rank `rank`: small integers (exact in every
/// dtype), different on every rank and element.
pub fn input<T: Scalar>(name: &str, rank: u32, shape: Shape2) -> Tensor<T> {
    Tensor::from_fn(name, shape, |i| {
        T::from_f64(((rank as usize * 31 + i * 7) % 23) as f64 - 11.0)
    })
}

/// The host's N-D input `[nranks, rows, cols]` (the tutorial's
/// `torch.randn((N_RANKS, 1, SIZE))`, made deterministic): its index `r`
/// (`x[r]`) is rank r's [`input`].
pub fn input_nd<T: Scalar>(name: &str, nranks: u32, per_rank: Shape2) -> Tensor<T> {
    Tensor {
        name: name.into(),
        shape: [u64::from(nranks) * per_rank[0], per_rank[1]],
        dims: vec![u64::from(nranks), per_rank[0], per_rank[1]],
        data: (0..nranks)
            .flat_map(|r| input::<T>(name, r, per_rank).data)
            .collect(),
    }
}

/// The golden of an all-reduce: the elementwise sum of every `x[r]`.
pub fn sum_of_slices<T: Scalar>(x: &Tensor<T>) -> Result<Vec<T>> {
    let n = x.dims().first().copied().unwrap_or(0);
    let mut acc = x.index(0)?.data;
    for r in 1..n {
        for (a, v) in acc.iter_mut().zip(x.index(r)?.data) {
            *a = a.add(v);
        }
    }
    Ok(acc)
}

/// Parses the command line, runs `make(args)`'s program on every rank,
/// prints OK or the failure, and exits.
pub fn main<P: Program>(make: impl FnOnce(&Args) -> Result<P>) {
    let args = Args::parse();
    let code = match run_cli(&args, make) {
        Ok(()) => {
            println!("OK");
            0
        }
        Err(msg) => {
            eprintln!("{msg}");
            1
        }
    };
    std::process::exit(code);
}

fn run_cli<P: Program>(args: &Args, make: impl FnOnce(&Args) -> Result<P>) -> Result<(), String> {
    let program = make(args).map_err(|e| format!("error: {e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("error: cannot start the runtime: {e}"))?;
    if args.compile_only {
        let plan = rt
            .block_on(plan(args, Arc::new(program)))
            .map_err(|e| format!("error: {e}"))?;
        print!("{plan}");
        println!("compile_only done");
        std::process::exit(0);
    }
    let checks = rt
        .block_on(run(args, Arc::new(program)))
        .map_err(|e| format!("error: {e}"))?;
    report(checks)
}

/// `Ok` if every rank's check passed, or the largest difference.
fn report(checks: Vec<Check>) -> Result<(), String> {
    let mut worst: Option<(u32, Check)> = None;
    for (r, c) in checks.into_iter().enumerate() {
        if c.failed()
            && worst
                .as_ref()
                .is_none_or(|(_, w)| c.max_diff > w.max_diff || !w.failed())
        {
            worst = Some((r as u32, c));
        }
    }
    match worst {
        None => Ok(()),
        Some((r, c)) => {
            let (i, g, w) = c.worst.unwrap_or((0, f64::NAN, f64::NAN));
            Err(format!(
                "FAILED: largest difference {:.3e} at rank {r}, element {i}: got {g}, want {w}",
                c.max_diff
            ))
        }
    }
}

/// Runs `program` on every rank `args` describes; returns each rank's check.
pub async fn run<P: Program>(args: &Args, program: Arc<P>) -> Result<Vec<Check>> {
    let profile = Profile::parse(&args.platform).ok_or_else(|| {
        Error::Usage(format!(
            "-p {} is not a device profile: a2a3sim or a5sim",
            args.platform
        ))
    })?;
    let timeout = pld_proto::units::parse_duration(&args.timeout)
        .map_err(|e| Error::Usage(format!("--timeout: {e}")))?;
    check_devices(&args.devices)?;
    let symmetry = Symmetry::shared();
    if args.daemons.is_empty() {
        let transport: TransportKind = args
            .transport
            .parse()
            .map_err(|e| Error::Usage(format!("--transport: {e}")))?;
        let windows = program.windows();
        let ranks: Vec<Arc<Rank>> =
            start_ranks_with(args.nranks(), transport, &windows, timeout, args.checked)
                .await?
                .into_iter()
                .map(Arc::new)
                .collect();
        let devices = ranks
            .iter()
            .map(|r| {
                let dev = Device::new(r.clone(), profile, program.windows());
                Arc::new(dev.with_symmetry(symmetry.clone()))
            })
            .collect();
        let checks = run_all(devices, program, &symmetry).await;
        crate::checked::verdict(&ranks, &symmetry)?;
        checks
    } else {
        let devices = connect(args, profile, &program.windows(), &symmetry).await?;
        clear(&devices, &program.windows()).await?;
        run_all(devices, program, &symmetry).await
    }
}

/// Each device id names one rank: a duplicate is an error naming it.
pub fn check_devices(ids: &[u32]) -> Result<()> {
    for (i, id) in ids.iter().enumerate() {
        if let Some(j) = ids[..i].iter().position(|d| d == id) {
            return Err(Error::Usage(format!(
                "-d lists device {id} twice (positions {j} and {i}); each rank needs its own device id"
            )));
        }
    }
    Ok(())
}

/// `--compile-only`: runs the kernel on every rank against a
/// [`Planner`] and returns, per rank, the messages it would send.
pub async fn plan<P: Program>(args: &Args, program: Arc<P>) -> Result<String> {
    let profile = Profile::parse(&args.platform).ok_or_else(|| {
        Error::Usage(format!(
            "-p {} is not a device profile: a2a3sim or a5sim",
            args.platform
        ))
    })?;
    check_devices(&args.devices)?;
    let n = args.nranks();
    let windows = program.windows();
    let names: Vec<String> = windows.iter().map(|(w, _)| w.clone()).collect();
    let symmetry = Symmetry::shared();
    let devices: Vec<_> = (0..n)
        .map(|r| {
            let planner = Planner::new(r, n, names.clone());
            let dev = Device::new(Arc::new(planner), profile, windows.clone());
            Arc::new(dev.with_symmetry(symmetry.clone()))
        })
        .collect();
    run_all(devices.clone(), program, &symmetry).await?;
    let mut out = format!(
        "compile_only: {n} ranks on {}; nothing was sent\n",
        profile.name()
    );
    for d in &devices {
        let sent = d.rma().messages();
        out.push_str(&format!(
            "rank {} would send {} messages\n",
            d.rank(),
            sent.len()
        ));
        for m in sent {
            out.push_str(&format!("  {m}\n"));
        }
    }
    Ok(out)
}

/// Starts `n` embedded ranks on free loopback ports, connected to each other.
pub async fn start_ranks(
    n: u32,
    transport: TransportKind,
    windows: &[(String, u64)],
    sync_timeout: Duration,
) -> Result<Vec<Rank>> {
    start_ranks_with(n, transport, windows, sync_timeout, CheckedMode::Off).await
}

/// [`start_ranks`] with checked mode `checked` on every rank.
pub async fn start_ranks_with(
    n: u32,
    transport: TransportKind,
    windows: &[(String, u64)],
    sync_timeout: Duration,
    checked: CheckedMode,
) -> Result<Vec<Rank>> {
    if n == 0 {
        return Err(Error::Usage("-d names no device".into()));
    }
    let mut peers = Vec::new();
    for _ in 0..n {
        let port = pld_server::transport::free_loopback_port()
            .map_err(|e| Error::Usage(format!("no free loopback port: {e}")))?;
        peers.push(format!("127.0.0.1:{port}"));
    }
    // The ranks authenticate each other under a CA that lives as long as
    // this launch.
    let security = pld_server::tls::ClusterCa::throwaway(n).map_err(|e| Error::Rma {
        rank: 0,
        reason: pld_proto::rma::Reason::reason(&e).into(),
        message: format!("cannot make the cluster's TLS material: {e}"),
    })?;
    let mut set = tokio::task::JoinSet::new();
    for (r, security) in (0..n).zip(security) {
        let mut c = Config::new(r, peers.clone());
        c.security = security;
        c.transport = transport;
        c.windows = windows
            .iter()
            .map(|(name, size)| WindowConfig {
                name: name.clone(),
                size: *size,
            })
            .collect();
        c.sync_timeout = sync_timeout;
        c.connect_timeout = Duration::from_secs(20);
        c.checked = checked;
        set.spawn(async move { (r, Rank::start(c).await) });
    }
    let mut ranks: Vec<Option<Rank>> = (0..n).map(|_| None).collect();
    while let Some(j) = set.join_next().await {
        let (r, rank) = j.map_err(|e| Error::Usage(format!("a rank failed to start: {e}")))?;
        ranks[r as usize] = Some(rank.map_err(|e| Error::Rma {
            rank: r,
            reason: pld_proto::rma::Reason::reason(&e).into(),
            message: format!("cannot start: {e}"),
        })?);
    }
    Ok(ranks.into_iter().flatten().collect())
}

/// Zeroes the program's part of every daemon's windows, each rank its
/// own, then waits for all: a kernel sees zeroed windows, as it does on
/// fresh in-process ranks, whatever earlier runs left in the daemons.
pub async fn clear<R: Rma + 'static>(
    devices: &[Arc<Device<R>>],
    windows: &[(String, u64)],
) -> Result<()> {
    let mut set = tokio::task::JoinSet::new();
    for dev in devices {
        let (dev, windows) = (dev.clone(), windows.to_vec());
        set.spawn(async move {
            let rma = dev.rma();
            let err = |e: R::Error| Error::Rma {
                rank: rma.rank(),
                reason: pld_proto::rma::Reason::reason(&e).into(),
                message: format!("clearing the windows: {e}"),
            };
            for (name, bytes) in &windows {
                let win = rma.window(name).map_err(err)?;
                rma.put(rma.rank(), win, 0, &vec![0u8; *bytes as usize])
                    .await
                    .map_err(err)?;
            }
            rma.barrier().await.map_err(err)
        });
    }
    while let Some(j) = set.join_next().await {
        j.map_err(|e| Error::Usage(format!("clearing the windows failed: {e}")))??;
    }
    Ok(())
}

/// Connects to `args.daemons` (in rank order) and makes a device of each,
/// with the program's windows (`needs`).
pub async fn connect(
    args: &Args,
    profile: Profile,
    needs: &[(String, u64)],
    symmetry: &Arc<Symmetry>,
) -> Result<Vec<Arc<Device<pld_client::Client>>>> {
    let mut out = Vec::new();
    for (i, addr) in args.daemons.iter().enumerate() {
        let opts = pld_client::ClientOptions {
            token: args.token.clone(),
            ..Default::default()
        };
        let c = pld_client::Client::connect_with(addr, opts)
            .await
            .map_err(|e| Error::Rma {
                rank: i as u32,
                reason: pld_proto::rma::Reason::reason(&e).into(),
                message: e.to_string(),
            })?;
        if c.rank() != i as u32 || c.nranks() != args.daemons.len() as u32 {
            return Err(Error::Usage(format!(
                "--daemons lists {addr} as rank {i} of {}, but it is rank {} of {}; list the daemons in rank order",
                args.daemons.len(),
                c.rank(),
                c.nranks()
            )));
        }
        // The program gets the part of each window it asked for.
        let mut windows = Vec::new();
        for (name, need) in needs {
            let have = c.info().windows.iter().find(|w| &w.name == name);
            match have {
                Some(w) if w.size >= *need => windows.push((name.clone(), *need)),
                _ => {
                    return Err(Error::Usage(format!(
                        "the daemon at {addr} has {}; this program needs window '{name}' of {need} bytes \
                         (pld-daemon --window {name}=SIZE)",
                        have.map_or("no such window".to_string(), |w| format!(
                            "'{name}' of {} bytes",
                            w.size
                        ))
                    )));
                }
            }
        }
        let dev = Device::new(Arc::new(c), profile, windows).with_symmetry(symmetry.clone());
        out.push(Arc::new(dev));
    }
    Ok(out)
}

async fn run_all<R: Rma + 'static, P: Program>(
    devices: Vec<Arc<Device<R>>>,
    program: Arc<P>,
    symmetry: &Symmetry,
) -> Result<Vec<Check>> {
    let mut set = tokio::task::JoinSet::new();
    for (r, dev) in devices.iter().enumerate() {
        let (p, dev) = (program.clone(), dev.clone());
        set.spawn(async move {
            // The kernel is complete once its deferred waits hold too.
            let res = match p.run(dev.clone()).await {
                Ok(c) => dev.complete().await.map(|()| c),
                Err(e) => Err(e),
            };
            (r, res)
        });
    }
    let mut checks = vec![Check::default(); set.len()];
    let mut first_err = None;
    while let Some(j) = set.join_next().await {
        let (r, res) = match j {
            Ok(v) => v,
            Err(e) if e.is_cancelled() => continue,
            Err(e) => return Err(Error::Usage(format!("a rank's kernel panicked: {e}"))),
        };
        match res {
            Ok(c) => checks[r] = c,
            Err(e) => {
                // The first failure is the cause; the other ranks would
                // only wait for the failed one until their deadline.
                first_err.get_or_insert(e);
                set.abort_all();
            }
        }
    }
    if first_err.is_none() {
        symmetry.check_complete(devices.len() as u32)?;
    }
    // Every rank stays up until every kernel is done: a rank that left
    // early would take its window, and the messages it still has in
    // flight, with it.
    drop(devices);
    match first_err {
        Some(e) => Err(e),
        None => Ok(checks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_the_largest_difference_and_where() {
        let good = Check::exact(&[1.0f32, 2.0], &[1.0, 2.0]);
        assert!(!good.failed());
        assert_eq!(report(vec![good.clone(), good.clone()]), Ok(()));
        let off = Check::close(&[1.0f32, 2.5, 3.0], &[1.0, 2.0, 3.0], 1e-5);
        let worse = Check::close(&[9.0f32], &[1.0], 1e-5);
        let msg = report(vec![good, off, worse]).unwrap_err();
        assert_eq!(
            msg,
            "FAILED: largest difference 8.000e0 at rank 2, element 0: got 9, want 1"
        );
        // Within tolerance, relative to the magnitude.
        assert!(!Check::close(&[1000.001f32], &[1000.0], 1e-5).failed());
        assert!(Check::exact(&[1i32], &[1, 2]).failed(), "lengths differ");
        assert!(Check::close(&[f32::NAN], &[1.0], 1e-5).failed());
    }
}
