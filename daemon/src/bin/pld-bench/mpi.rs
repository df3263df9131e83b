//! `--mpi`: MPI one-sided RMA measured in the same run, by our own
//! program (`daemon/bench/mpi_rma.c`, carried in this binary so an
//! installed `pld-bench` has it too), built with Open MPI's `mpicc` and run
//! with `mpirun` over TCP on loopback — no shared memory, the way pld's
//! ranks reach each other. Open MPI is Debian's `openmpi-bin` and
//! `libopenmpi-dev`, installed on demand where `apt-get` can.

use crate::cli::Cli;
use crate::report;
use anyhow::{Context, bail};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The benchmark's source.
const SOURCE: &str = include_str!("../../../bench/mpi_rma.c");

/// Open MPI over TCP on loopback only, its one-sided ops through the
/// point-to-point layer (`osc pt2pt`: over the TCP BTL the fastest of
/// Open MPI 4.1's one-sided components on our machines).
const MCA: [&str; 12] = [
    "--mca",
    "pml",
    "ob1",
    "--mca",
    "btl",
    "self,tcp",
    "--mca",
    "btl_tcp_if_include",
    "lo",
    "--mca",
    "osc",
    "pt2pt",
];

/// Runs the MPI benchmark at 2 ranks (and its barrier at each of
/// `cli.ranks` when barrier_lat is asked for): its figures by (op, size).
pub(crate) fn run(cli: &Cli) -> anyhow::Result<HashMap<(String, u64), f64>> {
    let (mpicc, mpirun) = open_mpi()?;
    // Source and program in a fresh directory no other user can
    // pre-create or swap a file in; removed at the end.
    let dir = pld_server::private::PrivateDir::new("pld-bench-mpi")
        .context("making the MPI benchmark's build directory")?;
    let exe = build(&mpicc, dir.path())?;
    let quick = cli.quick.then_some("--quick".to_string());
    let mut all = HashMap::new();
    let sizes: Vec<String> = cli.sizes.iter().map(u64::to_string).collect();
    let args: Vec<String> = quick.iter().cloned().chain(sizes).collect();
    all.extend(report::parse_mpi(&launch(&mpirun, &exe, 2, &args)?));
    if cli.wants("barrier_lat") || cli.wants("scale") {
        for &p in &cli.ranks {
            let args: Vec<String> = ["barrier".to_string()]
                .into_iter()
                .chain(quick.clone())
                .collect();
            all.extend(report::parse_mpi(&launch(&mpirun, &exe, p, &args)?));
        }
    }
    Ok(all)
}

fn build(mpicc: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    let src = dir.join("mpi_rma.c");
    pld_server::private::write_new(&src, SOURCE.as_bytes(), 0o600)?;
    let exe = dir.join("mpi_rma");
    let out = Command::new(mpicc)
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .with_context(|| format!("running {}", mpicc.display()))?;
    if !out.status.success() {
        bail!(
            "building the MPI benchmark with {} failed:\n{}",
            mpicc.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(exe)
}

fn launch(mpirun: &Path, exe: &Path, ranks: u32, args: &[String]) -> anyhow::Result<String> {
    let out = Command::new(mpirun)
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
        ])
        .args(["-np", &ranks.to_string()])
        .args(MCA)
        .args(["--mca", "oob_tcp_if_include", "lo"])
        .arg(exe)
        .args(args)
        .output()
        .with_context(|| format!("running {}", mpirun.display()))?;
    if !out.status.success() {
        bail!(
            "the MPI benchmark at {ranks} ranks failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Open MPI's `mpicc` and `mpirun` (Debian names them `*.openmpi`),
/// installed with apt-get if they are missing and it can.
fn open_mpi() -> anyhow::Result<(PathBuf, PathBuf)> {
    if let Some(found) = find_open_mpi() {
        return Ok(found);
    }
    const PACKAGES: [&str; 2] = ["openmpi-bin", "libopenmpi-dev"];
    let how = format!("apt-get install {}", PACKAGES.join(" "));
    if which("apt-get").is_none() {
        bail!(
            "--mpi needs Open MPI's mpicc and mpirun on PATH: install Open MPI (on Debian: {how})"
        );
    }
    eprintln!("pld-bench: --mpi needs Open MPI, which is not installed: running {how}");
    let ok = Command::new("apt-get")
        .args(["update", "-qq"])
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(PACKAGES)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
    match (ok, find_open_mpi()) {
        (true, Some(found)) => Ok(found),
        _ => {
            bail!("--mpi needs Open MPI, and installing it failed: run `{how}` as root, then again")
        }
    }
}

fn find_open_mpi() -> Option<(PathBuf, PathBuf)> {
    let mpicc = which("mpicc.openmpi").or_else(|| which("mpicc"))?;
    let mpirun = which("mpirun.openmpi").or_else(|| which("mpirun"))?;
    Some((mpicc, mpirun))
}

/// `name` on PATH.
fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
