//! What `pld-oshrun` does: N PEs on this host under a throwaway cluster CA,
//! their output forwarded (inherited), the first non-zero exit status
//! returned and the other PEs stopped at once — also when one calls
//! `shmem_global_exit`, which it reports on a control pipe. A signal to
//! the launcher is passed on to the PEs, which get [`GRACE`] to end
//! before they are killed; a launcher killed outright takes its PEs with
//! it ([`signals`]).

mod limits;
mod signals;

use anyhow::Context;
use std::io::{BufRead, BufReader};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long PEs sent a forwarded signal get to end before SIGKILL (as a
/// batch scheduler gives a job between TERM and KILL).
pub const GRACE: Duration = Duration::from_secs(5);

/// How to run a job.
#[derive(Debug, Clone)]
pub struct Job {
    /// How many PEs.
    pub npes: u32,
    /// `quic` or `tcp`.
    pub transport: String,
    /// `off`, `on` or `strict`.
    pub checked: String,
    /// `sleep` or `spin`.
    pub progress: String,
    /// `on` or `off` (`PLD_SHMEM_SHARED_MEMORY`).
    pub shared_memory: String,
    /// `core` or `none` (`PLD_BIND`).
    pub bind: String,
    /// The sync timeout of every wait and barrier.
    pub timeout: Option<Duration>,
    /// The program and its arguments.
    pub program: Vec<String>,
    /// Where to write the job's timeline (every PE's, merged).
    pub trace: Option<PathBuf>,
}

/// What ended the job.
enum Event {
    Exited(u32, std::io::Result<std::process::ExitStatus>),
    GlobalExit(u32, i32),
    Signal(libc::c_int),
}

/// An exit status as a shell reports it (128 + signal when killed).
fn code(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// Runs the job; returns the exit status the launcher exits with.
pub fn run(job: &Job) -> anyhow::Result<i32> {
    anyhow::ensure!(job.npes >= 1, "-np must be at least 1");
    limits::check(job.npes, &job.transport)?;
    if let Some(out) = &job.trace {
        pld_server::trace::check_writable(out)
            .with_context(|| format!("--trace {}: cannot write there", out.display()))?;
    }
    let connect_timeout = limits::connect_timeout(job.npes, &job.transport);
    let (program, args) = job.program.split_first().context("no program to run")?;
    // Before any thread starts, so that each inherits the blocked mask.
    let (tx, rx) = mpsc::channel();
    let on_signal = tx.clone();
    signals::catch(move |sig| {
        let _ = on_signal.send(Event::Signal(sig));
    })
    .context("catching the signals to pass on to the PEs")?;
    // The job's keys (and the PEs' traces) in a fresh directory no other
    // user can pre-create or read, removed when the job ends.
    let keys = pld_server::tls::TempTlsDir::named("pld-oshrun", "pld-oshrun", job.npes, &[])?;
    let dir = keys.path().to_path_buf();
    let mut ports = Vec::new();
    while ports.len() < job.npes as usize {
        let p = pld_server::transport::free_loopback_port()?;
        if !ports.contains(&p) {
            ports.push(p);
        }
    }
    let peers: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let (read_end, write_end) = control_pipe()?;
    let mut children: Vec<Option<Child>> = Vec::new();
    for rank in 0..job.npes {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env("PLD_RANK", rank.to_string())
            .env("PLD_PEERS", peers.join(","))
            .env("PLD_TLS_DIR", &dir)
            .env("PLD_TRANSPORT", &job.transport)
            .env("PLD_CHECKED", &job.checked)
            .env("PLD_PROGRESS", &job.progress)
            .env("PLD_SHMEM_SHARED_MEMORY", &job.shared_memory)
            .env("PLD_BIND", &job.bind)
            .env("PLD_SHMEM_CONTROL", write_end.to_string());
        if let Some(t) = job.timeout {
            cmd.env("PLD_SYNC_TIMEOUT", format!("{}ms", t.as_millis()));
        }
        if std::env::var_os("PLD_CONNECT_TIMEOUT").is_none() {
            let ms = connect_timeout.as_millis();
            cmd.env("PLD_CONNECT_TIMEOUT", format!("{ms}ms"));
        }
        if job.trace.is_some() {
            cmd.env("PLD_TRACE", dir.join(format!("trace-{rank}.json")));
        }
        signals::die_with_launcher(&mut cmd);
        match cmd.spawn() {
            Ok(c) => children.push(Some(c)),
            Err(e) => {
                stop(&mut children);
                return Err(e).with_context(|| format!("cannot start {program}"));
            }
        }
    }
    // The launcher's copy of the write end goes: the pipe then ends when
    // every PE has.
    // SAFETY: `write_end` is the pipe's write end, ours to close.
    drop(unsafe { OwnedFd::from_raw_fd(write_end) });
    let reader = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(std::fs::File::from(read_end))
            .lines()
            .map_while(Result::ok)
        {
            let mut w = line.split_whitespace();
            if let (Some("global_exit"), Some(Ok(pe)), Some(Ok(status))) =
                (w.next(), w.next().map(str::parse), w.next().map(str::parse))
            {
                let _ = reader.send(Event::GlobalExit(pe, status));
            }
        }
    });
    // The PEs still running, by PE: a PE's pid leaves the list as soon as
    // its exit is reported, so the launcher never signals a reaped pid.
    let mut running: Vec<Option<u32>> = Vec::new();
    for (rank, c) in children.iter_mut().enumerate() {
        let Some(mut child) = c.take() else { continue };
        running.push(Some(child.id()));
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send(Event::Exited(rank as u32, child.wait()));
        });
    }
    let mut left = job.npes;
    let mut result = 0;
    // Set once the PEs were sent a signal: when they are killed.
    let mut grace: Option<Instant> = None;
    while left > 0 {
        let event = match grace {
            None => rx.recv().ok(),
            Some(until) => rx
                .recv_timeout(until.saturating_duration_since(Instant::now()))
                .ok(),
        };
        match event {
            Some(Event::Exited(pe, Ok(s))) if s.success() => {
                running[pe as usize] = None;
                left -= 1;
            }
            Some(Event::Exited(pe, status)) => {
                running[pe as usize] = None;
                left -= 1;
                if grace.is_none() {
                    let c = status.map(code).unwrap_or(1);
                    crate::say::line(format_args!(
                        "pld-oshrun: PE {pe} exited with status {c}; stopping the other PEs"
                    ));
                    result = c;
                    break;
                }
            }
            Some(Event::GlobalExit(pe, status)) => {
                if grace.is_none() {
                    crate::say::line(format_args!(
                        "pld-oshrun: PE {pe} called shmem_global_exit({status}); stopping the other PEs"
                    ));
                    result = status;
                    break;
                }
            }
            Some(Event::Signal(sig)) if grace.is_none() => {
                crate::say::line(format_args!(
                    "pld-oshrun: got {}; passing it to the PEs, which get {GRACE:?} to end",
                    signals::name(sig)
                ));
                signal_running(&running, sig);
                grace = Some(Instant::now() + GRACE);
                result = 128 + sig;
            }
            // A second signal, the grace period over, or no more events.
            Some(Event::Signal(_)) | None => break,
        }
    }
    if left > 0 {
        signal_running(&running, libc::SIGKILL);
        // Reap them, so that none outlives the launcher even briefly.
        let until = Instant::now() + Duration::from_secs(5);
        while left > 0 {
            match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(Event::Exited(pe, _)) => {
                    running[pe as usize] = None;
                    left -= 1;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    if let Some(out) = &job.trace {
        merge_traces(&dir, job.npes, out)?;
    }
    Ok(result)
}

/// Merges the PEs' timelines (each written at its `shmem_finalize`) into
/// `out`; a PE that did not get there has none.
fn merge_traces(dir: &std::path::Path, npes: u32, out: &std::path::Path) -> anyhow::Result<()> {
    let mut docs = Vec::new();
    for pe in 0..npes {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("trace-{pe}.json"))) else {
            continue;
        };
        // A PE stopped while writing leaves part of a document: said, and
        // left out, so that the job's trace stays one a viewer reads.
        let doc = (format!("PE {pe}'s trace"), text);
        match pld_server::trace::merge_documents(std::slice::from_ref(&doc)) {
            Ok(_) => docs.push(doc),
            Err(e) => crate::say::line(format_args!("pld-oshrun: {e}; left out")),
        }
    }
    if (docs.len() as u32) < npes {
        crate::say::line(format_args!(
            "pld-oshrun: {} of {npes} PEs wrote a whole trace (a PE writes it at shmem_finalize)",
            docs.len()
        ));
    }
    let merged = pld_server::trace::merge_documents(&docs)?;
    std::fs::write(out, merged).with_context(|| format!("writing the trace to {}", out.display()))
}

/// Sends `sig` to every PE still running.
fn signal_running(running: &[Option<u32>], sig: libc::c_int) {
    for pid in running.iter().flatten() {
        // SAFETY: signals a PE we started whose exit has not been
        // reported: its thread is still waiting for it, so the pid is
        // still ours (a child is not reaped until that wait returns;
        // between the reaping and its report lie microseconds).
        unsafe { libc::kill(*pid as i32, sig) };
    }
}

fn stop(children: &mut [Option<Child>]) {
    for c in children.iter_mut().flatten() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// A pipe whose write end the PEs inherit.
fn control_pipe() -> anyhow::Result<(OwnedFd, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        anyhow::bail!(
            "cannot make the control pipe: {}",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: the read end is ours; close-on-exec keeps it from the PEs.
    let read = unsafe { OwnedFd::from_raw_fd(fds[0]) };
    // SAFETY: sets a flag on a descriptor we own.
    unsafe { libc::fcntl(fds[0], libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok((read, fds[1]))
}
