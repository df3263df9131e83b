//! The processes `pld-bench` starts: the target daemon, itself in an
//! internal role, and what it reads of them.

use crate::cli::Cli;
use anyhow::{Context, bail};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A child process, killed when dropped.
pub(crate) struct Proc(pub(crate) Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// Waits for the child's first stdout line (its ready line).
    pub(crate) fn ready(&mut self) -> anyhow::Result<String> {
        let out = self.0.stdout.take().context("child stdout")?;
        Self::read_ready(out)
    }

    /// The first line of a child's stdout (its ready line); blocks.
    pub(crate) fn read_ready(out: std::process::ChildStdout) -> anyhow::Result<String> {
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line)?;
        if line.is_empty() {
            bail!("the child exited before it was ready");
        }
        Ok(line)
    }
}

pub(crate) fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let p = me.with_file_name(name);
    if !p.exists() {
        bail!(
            "{} not found next to pld-bench: build it first (cargo build --release -p pld-daemon)",
            p.display()
        );
    }
    Ok(p)
}

pub(crate) fn me_as(cli: &Cli, internal: &str) -> anyhow::Result<Command> {
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
pub(crate) fn status_mib(pid: u32, field: &str) -> Option<f64> {
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

pub(crate) fn peak_mem(pid: u32) -> Option<f64> {
    status_mib(pid, "VmHWM:")
}
