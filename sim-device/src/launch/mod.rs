//! The launcher: `-p a2a3sim|a5sim -d 0,1[,...] [--mode M]` starts one rank
//! per device id — in this process over real loopback sockets by default,
//! or as clients of running daemons with `--daemons ADDR,...` — runs the
//! program's kernel on every rank at once, checks each rank's result
//! against its golden and prints `OK`, or the largest difference and fails.
//!
//! - this file: the command line ([`Args`]), the [`Program`] trait, and
//!   running a program on every rank (`main`, [`run`], [`plan`]);
//! - `golden`: each rank's result against its golden ([`Check`]) and the
//!   deterministic inputs the programs check against;
//! - `cluster`: the ranks a run uses — embedded ones started on loopback,
//!   or running daemons connected to — and their windows cleared.

mod cluster;
mod golden;

pub use cluster::{RankOptions, check_devices, clear, connect, start_ranks, start_ranks_with};
pub use golden::{Check, input, input_nd, sum_of_slices};

use crate::device::{Device, Symmetry};
use crate::error::{Error, Result};
use crate::plan::Planner;
use crate::tensor::Profile;
use clap::Parser;
use pld_proto::Rma;
use pld_server::{CheckedMode, Rank, TransportKind};
use std::future::Future;
use std::sync::Arc;

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
    /// Write a timeline of every rank's ops, barriers, waits and races to
    /// FILE (Chrome trace-event JSON: open it in ui.perfetto.dev). In-process
    /// ranks only; daemons take `--trace` themselves.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
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
    if let Some(path) = &args.trace {
        pld_server::trace::check_writable(path).map_err(|e| {
            Error::Usage(format!(
                "--trace {}: cannot write there: {e}",
                path.display()
            ))
        })?;
    }
    let symmetry = Symmetry::shared();
    if args.daemons.is_empty() {
        let transport: TransportKind = args
            .transport
            .parse()
            .map_err(|e| Error::Usage(format!("--transport: {e}")))?;
        let windows = program.windows();
        let opts = RankOptions {
            checked: args.checked,
            trace: args.trace.is_some(),
        };
        let ranks: Vec<Arc<Rank>> =
            start_ranks_with(args.nranks(), transport, &windows, timeout, opts)
                .await?
                .into_iter()
                .map(Arc::new)
                .collect();
        let devices = ranks
            .iter()
            .map(|r| {
                let dev = Device::new(r.clone(), profile, program.windows())
                    .with_trace(r.trace().cloned());
                Arc::new(dev.with_symmetry(symmetry.clone()))
            })
            .collect();
        let checks = run_all(devices, program, &symmetry).await;
        if let Some(path) = &args.trace {
            write_trace(path, &ranks)?;
        }
        crate::checked::verdict(&ranks, &symmetry)?;
        checks
    } else {
        let devices = connect(args, profile, &program.windows(), &symmetry).await?;
        clear(&devices, &program.windows()).await?;
        run_all(devices, program, &symmetry).await
    }
}

/// Writes the ranks' timelines to `path` as one trace document.
pub fn write_trace(path: &std::path::Path, ranks: &[Arc<Rank>]) -> Result<()> {
    let traces: Vec<&pld_server::Trace> = ranks
        .iter()
        .filter_map(|r| r.trace())
        .map(|t| &**t)
        .collect();
    std::fs::write(path, pld_server::trace::merge(&traces))
        .map_err(|e| Error::Usage(format!("--trace {}: {e}", path.display())))
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
