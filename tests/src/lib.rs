//! Helpers for pld's multi-process integration tests: spawn real
//! `pld-daemon` processes on free loopback ports, form clusters that mix
//! embedded [`Rank`]s with daemons, and talk raw frames to a daemon.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
pub mod harness;
pub mod local_user;
pub mod netns;
pub mod raw;

use pld_server::transport::free_loopback_port;
use pld_server::{Config, Rank, TransportKind, WindowId};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Windows every test cluster has: `data` big enough for 8 MiB transfers,
/// and `signal`.
pub const WINDOWS: [&str; 2] = ["data=16MiB", "signal=64KiB"];

/// Daemon flags for small windows (collective scratch included), for
/// tests that do not move megabytes.
pub const SMALL_WINDOWS: [&str; 6] = [
    "--window",
    "data=1MiB",
    "--window",
    "signal=64KiB",
    "--window",
    "collective=64KiB",
];

/// The `pld-daemon` binary built by this workspace.
///
/// `cargo test --workspace` builds it (pld-server has integration tests,
/// which makes cargo build its binaries). `PLD_DAEMON` overrides the path.
pub fn daemon_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("PLD_DAEMON") {
        return PathBuf::from(p);
    }
    // target/<profile>/deps/<test-exe> -> target/<profile>/pld-daemon
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir layout");
    let bin = dir.join("pld-daemon");
    assert!(
        bin.exists(),
        "{} does not exist: run the tests with `cargo test --workspace` (or build it: cargo build -p pld-server)",
        bin.display()
    );
    bin
}

/// The example program `name` of the crate whose tests run (`cargo test
/// -p pld-sim` builds its examples): target/<profile>/examples/<name>.
pub fn example_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("examples").join(name);
    assert!(
        bin.exists(),
        "{} does not exist: `cargo test -p pld-sim` builds it",
        bin.display()
    );
    bin
}

/// The `pld-test-rank` program of this crate (a rank that runs a scenario;
/// see `src/bin/pld-test-rank.rs`). Cargo builds it for this crate's tests.
pub fn worker_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir layout");
    dir.join("pld-test-rank")
}

/// The most ranks a test cluster has: the shared TLS material covers
/// ranks `0..MAX_RANKS`.
pub const MAX_RANKS: u32 = 32;

/// [`Daemon::runnable_times`] of process `pid`.
pub fn runnable_times_of(pid: u32) -> std::collections::HashMap<u32, Duration> {
    let mut out = std::collections::HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(t.path().join("schedstat")) else {
            continue;
        };
        // On a CPU, then waiting for one, in ns; then the timeslices.
        let ns: Vec<u64> = stat
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        if let [run, wait, ..] = ns[..] {
            out.insert(tid, Duration::from_nanos(run + wait));
        }
    }
    out
}

/// The TLS material every test cluster of this process (and of the rank
/// processes it starts, through `PLD_TEST_TLS_DIR`) uses: one throwaway CA
/// and certificates for ranks `0..MAX_RANKS`, made on first use in
/// a fresh `$TMPDIR/pld-tests-tls-PID-XXXXXX`. Directories of test processes that are
/// gone are removed then.
pub fn tls_dir() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("PLD_TEST_TLS_DIR") {
            return PathBuf::from(d);
        }
        // Directories of test processes that are gone (this user's only).
        let tmp = std::env::temp_dir();
        if let Ok(entries) = std::fs::read_dir(&tmp) {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let pid = name
                    .strip_prefix("pld-tests-tls-")
                    .and_then(|rest| rest.split('-').next());
                let ours = e.metadata().is_ok_and(|m| m.uid() == me);
                if let Some(pid) = pid
                    && ours
                    && !std::path::Path::new("/proc").join(pid).exists()
                {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let prefix = format!("pld-tests-tls-{}", std::process::id());
        let names = pld_server::tls::LOCAL_GRPC_NAMES.map(String::from);
        pld_server::tls::TempTlsDir::named(&prefix, "pld-tests", MAX_RANKS, &names)
            .expect("writing the test cluster's TLS material")
            .keep()
    })
}

/// Rank `rank`'s security in a test cluster: mutual TLS under [`tls_dir`].
pub fn security(rank: u32) -> pld_server::Security {
    pld_server::Security::from_dir(tls_dir(), rank).expect("test TLS material")
}

/// Free loopback `HOST:PORT` entries for a cluster of `n` ranks.
pub fn loopback_peers(n: usize) -> Vec<String> {
    (0..n)
        .map(|_| format!("127.0.0.1:{}", free_loopback_port().expect("free port")))
        .collect()
}

/// A `pld-daemon` child process; killed when dropped.
#[derive(Debug)]
pub struct Daemon {
    /// The rank it runs.
    pub rank: u32,
    child: Child,
    stdout: std::sync::Mutex<mpsc::Receiver<String>>,
    stderr: Option<std::thread::JoinHandle<String>>,
    /// What the process wrote to stderr so far.
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Daemon {
    /// Spawns `pld-daemon --rank RANK --peers PEERS ...extra`.
    pub fn spawn(rank: u32, peers: &[String], transport: TransportKind, extra: &[&str]) -> Daemon {
        let mut cmd = Command::new(daemon_bin());
        cmd.args(Self::args(rank, peers, transport, extra));
        Self::start(rank, cmd)
    }

    /// The flags of [`Daemon::spawn`]: the test windows and TLS material
    /// unless `extra` gives its own.
    pub fn args(
        rank: u32,
        peers: &[String],
        transport: TransportKind,
        extra: &[&str],
    ) -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> = Vec::new();
        let mut push = |s: &str| a.push(s.into());
        push("--rank");
        push(&rank.to_string());
        push("--peers");
        push(&peers.join(","));
        push("--transport");
        push(&transport.to_string());
        if !extra.contains(&"--window") {
            for w in WINDOWS {
                push("--window");
                push(w);
            }
        }
        if !extra.contains(&"--tls-dir") && !extra.contains(&"--insecure") {
            push("--tls-dir");
            a.push(tls_dir().into());
        }
        a.extend(extra.iter().map(Into::into));
        a
    }

    /// Spawns `pld-test-rank`: rank `rank` running `scenario` (a process
    /// that embeds a rank, as a user's program would).
    pub fn worker(
        rank: u32,
        peers: &[String],
        transport: TransportKind,
        scenario: &[&str],
    ) -> Daemon {
        let mut cmd = Command::new(worker_bin());
        cmd.args(["--rank", &rank.to_string(), "--peers", &peers.join(",")])
            .args(["--transport", &transport.to_string()])
            .args(scenario);
        Self::start(rank, cmd)
    }

    /// Runs `cmd` (a rank's process, however it is started) as rank `rank`.
    pub fn start(rank: u32, mut cmd: Command) -> Daemon {
        // The command's own RUST_LOG, else the test's, else warnings.
        let own = cmd.get_envs().any(|(k, v)| k == "RUST_LOG" && v.is_some());
        if !own {
            cmd.env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            );
        }
        cmd.env("PLD_TEST_TLS_DIR", tls_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the rank's process");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let err = child.stderr.take().expect("stderr");
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let stderr = std::thread::spawn({
            let log = log.clone();
            move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
                    l.push_str(&line);
                    l.push('\n');
                }
                let s = log.lock().unwrap_or_else(|p| p.into_inner()).clone();
                // Show the daemon's log in the test's output.
                eprint!("{s}");
                s
            }
        });
        Daemon {
            rank,
            child,
            stdout: std::sync::Mutex::new(rx),
            stderr: Some(stderr),
            log,
        }
    }

    /// Waits for the daemon's ready line (it prints it once every peer is
    /// connected) and returns it. Panics if the daemon exits or times out.
    pub fn wait_ready(&mut self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        let line = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .stdout
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .recv_timeout(left);
            // The addresses of the gRPC and metrics ports come first.
            match line {
                Ok(l) if l.contains(" gRPC on ") || l.contains(" metrics on ") => continue,
                other => break other,
            }
        };
        match line {
            Ok(line) if line.contains("ready") => line,
            Ok(line) => panic!("rank {}: unexpected first line {line:?}", self.rank),
            Err(_) => {
                let status = self.child.try_wait().ok().flatten();
                panic!(
                    "rank {} not ready within {within:?} (exit status {status:?})",
                    self.rank
                );
            }
        }
    }

    /// The next line the process prints, if it prints one within `within`.
    pub fn next_line(&self, within: Duration) -> Option<String> {
        self.stdout
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .recv_timeout(within)
            .ok()
    }

    /// Waits for the daemon to exit on its own; returns success and stderr.
    pub fn wait_exit(mut self, within: Duration) -> (bool, String) {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                let stderr = self.stderr.take().and_then(|t| t.join().ok());
                return (status.success(), stderr.unwrap_or_default());
            }
            assert!(
                Instant::now() < deadline,
                "rank {} still running after {within:?}",
                self.rank
            );
            // Polling a child process's exit status: there is no portable
            // blocking wait with a deadline in std.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the process has written to stderr so far.
    pub fn log_so_far(&self) -> String {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits (up to `within`) until the process's stderr contains `text`.
    pub fn wait_log(&self, text: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.log_so_far().contains(text) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            // Polling a pipe another thread reads: no event to wait on.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, then everything the process wrote to stderr.
    pub fn kill_and_stderr(mut self) -> String {
        self.kill_and_stderr_now()
    }

    /// SIGKILL, then everything the process wrote to stderr (the daemon
    /// stays in its cluster's list, dead).
    pub fn kill_and_stderr_now(&mut self) -> String {
        self.kill();
        self.stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }

    /// The process's peak resident memory (VmHWM), in bytes.
    pub fn peak_memory(&self) -> Option<u64> {
        peak_memory_of(self.child.id())
    }

    /// The process's resident memory now (VmRSS), in bytes.
    pub fn memory(&self) -> Option<u64> {
        proc_status_kib(self.child.id(), "VmRSS:").map(|kib| kib * 1024)
    }

    /// CPU time the process has used so far (user + system).
    pub fn cpu_time(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // Fields after the command name (which may hold spaces) in parentheses.
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Some(Duration::from_millis(ticks * 1000 / hz))
    }

    /// How long each of the process's threads has been runnable so far —
    /// on a CPU or waiting in a run queue (`/proc/PID/task/*/schedstat`),
    /// by thread id.
    pub fn runnable_times(&self) -> std::collections::HashMap<u32, Duration> {
        runnable_times_of(self.child.id())
    }

    /// The share of the wall time over `window` that the process's threads
    /// were runnable, summed over its threads (1.0: one thread runnable
    /// throughout). A thread that spins is runnable all the time whether
    /// the machine lets it run or not, so unlike a CPU-time share this
    /// tells a spinner (about 1 per spinning thread) from an idle process
    /// (near 0) on a loaded machine too.
    pub async fn runnable_share(&self, window: Duration) -> f64 {
        let (before, t0) = (self.runnable_times(), Instant::now());
        tokio::time::sleep(window).await;
        let after = self.runnable_times();
        let wall = t0.elapsed().as_secs_f64();
        let busy: f64 = after
            .iter()
            .filter_map(|(tid, t)| Some(t.saturating_sub(*before.get(tid)?).as_secs_f64()))
            .sum();
        busy / wall
    }

    /// Sends the process signal `sig` (`libc::SIGSTOP`, `SIGTERM`, ...).
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let r = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(r, 0, "signal {sig} to rank {}", self.rank);
    }

    /// Stops the process (SIGSTOP): it holds its sockets and answers
    /// nothing until [`Daemon::resume`].
    ///
    /// kill(2) returns before the signal has reached every thread: a thread
    /// running on another core goes on until it is interrupted, and may
    /// still answer what arrives meanwhile. So this returns only once every
    /// thread of the process is seen stopped in `/proc`.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !all_threads_stopped(self.child.id()) {
            assert!(
                Instant::now() < deadline,
                "rank {} not stopped 10 s after SIGSTOP",
                self.rank
            );
            std::thread::yield_now();
        }
    }

    /// Resumes a paused process (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Asks the process to stop (SIGTERM): a graceful shutdown.
    pub fn terminate(&self) {
        self.signal(libc::SIGTERM);
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// SIGKILL: the rank dies without a word to its peers.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether every thread of process `pid` is in the stopped state (`T`).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            .and_then(|stat| {
                // The state follows the command name, which is in parentheses.
                let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
                Some(state == "T" || state == "t")
            })
            .unwrap_or(false)
    })
}

/// Configuration of an embedded rank of a test cluster.
pub fn rank_config(rank: u32, peers: &[String], transport: TransportKind) -> Config {
    let mut c = Config::new(rank, peers.to_vec());
    c.transport = transport;
    c.windows = WINDOWS.iter().map(|w| w.parse().expect("window")).collect();
    c.connect_timeout = Duration::from_secs(30);
    c.op_timeout = Duration::from_secs(10);
    c.security = security(rank);
    c
}

/// A cluster of embedded ranks (driven by the test) and daemons.
#[derive(Debug)]
pub struct Cluster {
    /// `HOST:PORT` of every rank's peer plane.
    pub peers: Vec<String>,
    /// Embedded ranks, by rank id (`None` where a daemon runs).
    pub ranks: Vec<Option<Rank>>,
    /// The daemon processes.
    pub daemons: Vec<Daemon>,
    /// The peer-plane transport.
    pub transport: TransportKind,
}

impl Cluster {
    /// `n` ranks; those in `daemons` are `pld-daemon` processes, the rest
    /// are embedded in this process. Returns once everyone is connected.
    pub async fn start(transport: TransportKind, n: u32, daemons: &[u32]) -> Cluster {
        Self::start_with(transport, n, daemons, |_| {}).await
    }

    /// As [`Cluster::start`], with a hook to adjust embedded ranks' configs.
    pub async fn start_with(
        transport: TransportKind,
        n: u32,
        daemons: &[u32],
        tweak: impl Fn(&mut Config),
    ) -> Cluster {
        Self::start_windows(transport, n, daemons, &WINDOWS, tweak).await
    }

    /// As [`Cluster::start_with`], with other windows (`NAME=SIZE`) on every rank.
    pub async fn start_windows(
        transport: TransportKind,
        n: u32,
        daemons: &[u32],
        windows: &[&str],
        tweak: impl Fn(&mut Config),
    ) -> Cluster {
        Self::start_full(transport, n, daemons, windows, &[], tweak).await
    }

    /// As [`Cluster::start_windows`], with more flags for the daemons.
    pub async fn start_full(
        transport: TransportKind,
        n: u32,
        daemons: &[u32],
        windows: &[&str],
        daemon_args: &[&str],
        tweak: impl Fn(&mut Config),
    ) -> Cluster {
        let peers = loopback_peers(n as usize);
        let mut args: Vec<&str> = windows.iter().flat_map(|w| ["--window", *w]).collect();
        args.extend_from_slice(daemon_args);
        let mut procs: Vec<Daemon> = daemons
            .iter()
            .map(|r| Daemon::spawn(*r, &peers, transport, &args))
            .collect();
        let mut set = tokio::task::JoinSet::new();
        for r in (0..n).filter(|r| !daemons.contains(r)) {
            let mut c = rank_config(r, &peers, transport);
            c.windows = windows.iter().map(|w| w.parse().expect("window")).collect();
            tweak(&mut c);
            set.spawn(async move { (r, Rank::start(c).await) });
        }
        let mut ranks: Vec<Option<Rank>> = (0..n).map(|_| None).collect();
        while let Some(j) = set.join_next().await {
            let (r, rank) = j.expect("join");
            ranks[r as usize] =
                Some(rank.unwrap_or_else(|e| panic!("rank {r} failed to start: {e}")));
        }
        for d in &mut procs {
            d.wait_ready(Duration::from_secs(30));
        }
        Cluster {
            peers,
            ranks,
            daemons: procs,
            transport,
        }
    }

    /// The embedded rank `r`.
    pub fn rank(&self, r: u32) -> &Rank {
        self.ranks[r as usize]
            .as_ref()
            .unwrap_or_else(|| panic!("rank {r} is a daemon"))
    }

    /// Every embedded rank.
    pub fn embedded(&self) -> impl Iterator<Item = &Rank> {
        self.ranks.iter().flatten()
    }

    /// The daemon running rank `r`.
    pub fn daemon(&mut self, r: u32) -> &mut Daemon {
        self.daemons
            .iter_mut()
            .find(|d| d.rank == r)
            .unwrap_or_else(|| panic!("rank {r} is not a daemon"))
    }

    /// Window `name` (the same id on every rank).
    pub fn window(&self, name: &str) -> WindowId {
        self.embedded()
            .next()
            .expect("an embedded rank")
            .window(name)
            .expect("window")
    }

    /// Number of ranks.
    pub fn n(&self) -> u32 {
        self.ranks.len() as u32
    }
}

/// Daemons that serve the gRPC client plane, each on a free loopback port.
#[derive(Debug)]
pub struct GrpcCluster {
    /// The peer-plane transport.
    pub transport: TransportKind,
    /// `HOST:PORT` of every rank's peer plane.
    pub peers: Vec<String>,
    /// The gRPC `HOST:PORT` of each rank.
    pub grpc: Vec<String>,
    /// Flags every daemon gets (windows included).
    pub args: Vec<String>,
    /// The daemons spawned so far, by rank.
    pub daemons: Vec<Option<Daemon>>,
}

impl GrpcCluster {
    /// Addresses for `n` ranks; nothing runs yet.
    pub fn plan(transport: TransportKind, n: usize, args: &[&str]) -> GrpcCluster {
        GrpcCluster {
            transport,
            peers: loopback_peers(n),
            grpc: loopback_peers(n),
            args: args.iter().map(|a| a.to_string()).collect(),
            daemons: (0..n).map(|_| None).collect(),
        }
    }

    /// `n` daemons, started and ready.
    pub fn start(transport: TransportKind, n: usize, args: &[&str]) -> GrpcCluster {
        let mut c = GrpcCluster::plan(transport, n, args);
        for r in 0..n as u32 {
            c.spawn(r);
        }
        for r in 0..n as u32 {
            c.daemon(r).wait_ready(Duration::from_secs(30));
        }
        c
    }

    /// Spawns rank `r`'s daemon. Its first line says where gRPC listens;
    /// the ready line follows once the mesh is up.
    pub fn spawn(&mut self, r: u32) -> &mut Daemon {
        self.spawn_with(r, &[])
    }

    /// Spawns rank `r`'s daemon with flags of its own besides the cluster's.
    pub fn spawn_with(&mut self, r: u32, extra: &[&str]) -> &mut Daemon {
        let mut args: Vec<&str> = vec!["--grpc", &self.grpc[r as usize]];
        args.extend(self.args.iter().map(String::as_str));
        args.extend_from_slice(extra);
        let d = Daemon::spawn(r, &self.peers, self.transport, &args);
        let first = d
            .next_line(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("rank {r} printed no gRPC address"));
        assert!(first.contains("gRPC on"), "rank {r}: {first}");
        let slot = &mut self.daemons[r as usize];
        *slot = Some(d);
        slot.as_mut().expect("just set")
    }

    /// Rank `r`'s daemon.
    pub fn daemon(&mut self, r: u32) -> &mut Daemon {
        self.daemons[r as usize]
            .as_mut()
            .unwrap_or_else(|| panic!("rank {r} was not spawned"))
    }
}

/// Peak resident memory (VmHWM) of process `pid`, in bytes (Linux).
pub fn peak_memory_of(pid: u32) -> Option<u64> {
    proc_status_kib(pid, "VmHWM:").map(|kib| kib * 1024)
}

/// A `/proc/PID/status` line's figure in KiB.
fn proc_status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Deterministic pseudo-random bytes.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Runs a test body on a multi-threaded runtime with an overall deadline,
/// so that a hang fails the test instead of the CI job.
pub fn run<F: std::future::Future<Output = ()>>(limit: Duration, body: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            tokio::time::timeout(limit, body)
                .await
                .unwrap_or_else(|_| panic!("test did not finish within {limit:?}"))
        });
}

/// Declares a test that runs once over QUIC and once over TCP:
/// `both!(name, seconds, |transport| async move { ... })`.
#[macro_export]
macro_rules! both {
    ($name:ident, $secs:expr, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn quic() {
                $crate::run(
                    std::time::Duration::from_secs($secs),
                    ($body)(pld_server::TransportKind::Quic),
                );
            }
            #[test]
            fn tcp() {
                $crate::run(
                    std::time::Duration::from_secs($secs),
                    ($body)(pld_server::TransportKind::Tcp),
                );
            }
        }
    };
}

/// Polls several futures of one type to completion together (in this
/// task: they may borrow), returning their outputs in order.
pub async fn join_all<F: std::future::Future>(fs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut fs: Vec<_> = fs.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = fs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in fs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// A cluster of `n` ranks whose rank 1 is a daemon (the others embedded),
/// with rank 1's `data` and `signal` windows filled with a pattern; returns
/// the cluster and what the windows hold, for [`assert_unchanged`].
pub async fn patterned(
    t: TransportKind,
    n: u32,
    seed: u64,
) -> (Cluster, bytes::Bytes, bytes::Bytes) {
    let c = Cluster::start(t, n, &[1]).await;
    let r = c.rank(0);
    let (data, signal) = (c.window("data"), c.window("signal"));
    r.put(1, data, 0, &pattern(16 << 20, seed)).await.unwrap();
    r.put(1, signal, 0, &pattern(64 << 10, seed + 1))
        .await
        .unwrap();
    let d = r.get(1, data, 0, 16 << 20).await.unwrap();
    let s = r.get(1, signal, 0, 64 << 10).await.unwrap();
    (c, d, s)
}

/// Rank 1's daemon still serves, and its windows hold exactly what
/// [`patterned`] returned.
pub async fn assert_unchanged(c: &mut Cluster, data: &bytes::Bytes, signal: &bytes::Bytes) {
    assert!(c.daemon(1).alive(), "the daemon kept running");
    let r = c.rank(0);
    let d = r
        .get(1, c.window("data"), 0, 16 << 20)
        .await
        .expect("the daemon still serves");
    let s = r.get(1, c.window("signal"), 0, 64 << 10).await.unwrap();
    assert!(d == *data, "no byte of window 'data' changed");
    assert!(s == *signal, "no byte of window 'signal' changed");
}
