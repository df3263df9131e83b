//! The processing element: one per process, made by `shmem_init`. It owns
//! the embedded pld rank, the runtime that serves the rank's peers while
//! the program computes, the symmetric spaces and the heap's allocator.
//! The C entry points (`capi`) reach it through [`pe`].

use crate::addr::{NotSymmetric, Space, Spaces};
use crate::env::{Auth, Settings};
use crate::heap::Heap;
use crate::team::sync::SyncArea;
use pld_server::{Config, ForeignMemory, Rank, Security, WindowId};
use std::io::Write;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The heap window's name.
pub const HEAP_WINDOW: &str = "shmem.heap";
/// The data segment window's name.
pub const DATA_WINDOW: &str = "shmem.data";
/// Bytes at the start of the heap the teams' sync cells and scratch take
/// (`team::SLOTS` slots).
pub const TEAM_BYTES: u64 = 1 << 20;
/// Bytes at the start of the heap window the library keeps for itself:
/// the teams' bytes, then this PE's control block (`near::CONTROL`);
/// programs' allocations start after.
pub const RESERVED: u64 = TEAM_BYTES + (64 << 10);
/// The offset of the call cell the active-set collectives agree on their
/// calls in under `--checked` (`team::agree`): after the control block.
pub const ACTIVE_CALL: u64 = TEAM_BYTES + 1024;
const _: () = assert!(ACTIVE_CALL + crate::team::agree::CALL_BYTES as u64 <= RESERVED);

/// A fetching op whose value lands in the program's memory at the next
/// quiet: a fetching `_nbi` atomic, or a `get_nbi` into private memory.
pub(crate) enum Deferred {
    /// A value of `width` bytes to write at `to`.
    Value {
        handle: pld_server::OpHandle<i64>,
        to: usize,
        width: usize,
    },
    /// Bytes to copy to `to`.
    Bytes {
        handle: pld_server::OpHandle<pld_proto::bytes::Bytes>,
        to: usize,
    },
}

/// One PE.
pub(crate) struct Pe {
    rt: tokio::runtime::Runtime,
    rank: Rank,
    spaces: Spaces<WindowId>,
    heap: Mutex<Heap>,
    deferred: Mutex<Vec<Deferred>>,
    sync_timeout: Duration,
    /// Whether the race detector runs (`--checked`): the collectives then
    /// agree on their calls first.
    checked: bool,
    control: Option<i32>,
    /// `PLD_TRACE`: where `shmem_finalize` writes the timeline.
    trace: Option<std::path::PathBuf>,
    finalized: AtomicBool,
    /// The teams this PE belongs to.
    teams: crate::team::Registry,
    /// `SHMEM_TEAM_WORLD`, which no call destroys: every barrier and
    /// world collective takes it without the registry's lock.
    world_team: std::sync::OnceLock<std::sync::Arc<crate::team::Team>>,
    /// The PEs on this host: `SHMEM_TEAM_SHARED`.
    shared: Vec<u32>,
    /// Every PE's heap, mapped, when the job uses shared memory.
    near: Option<crate::near::Near>,
    /// The contexts the program created.
    contexts: Mutex<crate::capi::ctx::Contexts>,
    /// Per active set and `pSync` array, its barrier.
    active_sets: Mutex<std::collections::HashMap<ActiveSet, Arc<SyncArea>>>,
    /// What the executable's link-time addresses are offset by.
    load_base: usize,
    /// The executable's data symbols, read when a message first needs one.
    symbols: OnceLock<Vec<crate::symbols::Symbol>>,
}

static PE: OnceLock<Pe> = OnceLock::new();

/// An active set of the 1.4 collectives, with its `pSync` array's address.
pub(crate) type ActiveSet = (usize, i32, i32, i32);

/// Set once a fatal error is on its way out: the exit handler then only
/// closes the links (no quiet that could wait on what failed).
static FATAL: AtomicBool = AtomicBool::new(false);

/// Stops the program: OpenSHMEM calls return nothing, so an error is
/// fatal — said on stderr with the PE's number, then exit status 1, which
/// makes `pld-oshrun` stop the other PEs.
pub(crate) fn fatal(msg: impl std::fmt::Display) -> ! {
    let who = PE.get().map(|p| format!("PE {}", p.rank.rank()));
    let _ = std::io::stdout().flush();
    crate::say::line(format_args!(
        "pld-shmem: {}: error: {msg}",
        who.as_deref().unwrap_or("PE ?")
    ));
    // SAFETY: exit runs the C program's atexit handlers and flushes its
    // stdio, as returning from main would.
    unsafe { libc::exit(1) }
}

/// Says `msg` as a warning of this PE; the program goes on.
pub(crate) fn warn(msg: impl std::fmt::Display) {
    let who = PE.get().map(|p| format!("PE {}", p.rank.rank()));
    crate::say::line(format_args!(
        "pld-shmem: {}: warning: {msg}",
        who.as_deref().unwrap_or("PE ?")
    ));
}

/// The PE, for the call `call`; fatal before `shmem_init`, and after
/// `shmem_finalize` (which must be the last call: its links are closed),
/// whichever path the call would take.
pub(crate) fn pe(call: &'static str) -> &'static Pe {
    let p = pe_query(call);
    if p.finalized.load(Ordering::Acquire) && call != "shmem_finalize" {
        fatal(format!(
            "{call} called after shmem_finalize, which must be the last OpenSHMEM call"
        ));
    }
    p
}

/// The PE, for a query of its constants (`shmem_my_pe`, `shmem_n_pes`),
/// which programs also make after `shmem_finalize`; fatal before
/// `shmem_init`.
pub(crate) fn pe_query(call: &'static str) -> &'static Pe {
    match PE.get() {
        Some(p) => p,
        None => fatal(format!("{call} called before shmem_init")),
    }
}

/// Starts the PE (idempotent: a second `shmem_init` is a no-op).
pub(crate) fn init() -> &'static Pe {
    if let Some(p) = PE.get() {
        return p;
    }
    let started = match start() {
        Ok(p) => p,
        Err(e) => fatal(format!("shmem_init: {e:#}")),
    };
    let _ = PE.set(started);
    let p = pe("shmem_init");
    *p.teams() = crate::team::Teams::start(p, p.shared.clone());
    if let Some(world) = p.teams().get(crate::team::WORLD) {
        let _ = p.world_team.set(world);
    }
    // SAFETY: registers a plain `extern "C" fn()`.
    unsafe { libc::atexit(at_exit) };
    pe("shmem_init")
}

/// Runs when the program exits — OpenSHMEM 1.0 programs return from `main`
/// without `shmem_finalize`, and a fatal error exits: what this PE issued
/// is completed (unless an error is why it exits) and its links are
/// closed in order, so that peers receive everything it sent, down to its
/// last barrier signal, and then see it leave.
extern "C" fn at_exit() {
    let Some(p) = PE.get() else { return };
    if p.finalized.swap(true, Ordering::AcqRel) {
        return;
    }
    // On a thread of its own: glibc has destroyed the exiting thread's
    // thread-locals (the runtime's context among them) before it runs
    // exit handlers.
    let closing = std::thread::spawn(|| {
        if !FATAL.load(Ordering::Acquire) {
            let _ = p.block(p.rank.quiet_within(p.sync_timeout));
        }
        let races = crate::names::report_races(p);
        p.block(p.rank.shutdown());
        races
    });
    if closing.join().unwrap_or(0) > 0 && !FATAL.load(Ordering::Acquire) {
        // SAFETY: _exit ends the process now, with the status that says
        // the run raced (exit handlers cannot call exit again).
        unsafe { libc::_exit(1) }
    }
}

fn start() -> anyhow::Result<Pe> {
    let s = Settings::from(|k| std::env::var(k).ok())?;
    let security = match &s.auth {
        Auth::Tls(dir) => Security::from_dir(dir, s.rank)?,
        Auth::Insecure => Security::Insecure,
    };
    let mut config = Config::new(s.rank, s.peers.clone());
    config.transport = s.transport;
    // The heap is memory this process maps, aligned to HEAP_ALIGN, so that
    // an offset aligned for `shmem_align` is an aligned address on every PE.
    // Shared (a memory file the other PEs of this host may map) unless
    // the race detector must see every op, or the user said no.
    let share = s.shared_memory && s.checked == pld_server::CheckedMode::Off;
    let (heap, heap_file) = crate::heap::map(s.heap_size, share)?;
    // SAFETY: the mapping lives as long as the process (it is never
    // unmapped) and is HEAP_ALIGN-aligned; it is symmetric memory.
    let heap_memory = unsafe { ForeignMemory::new(HEAP_WINDOW, heap, s.heap_size)? };
    config.windows = Vec::new();
    config.lent.push(Arc::new(heap_memory));
    config.security = security;
    config.sync_timeout = s.sync_timeout;
    config.connect_timeout = s.connect_timeout;
    config.op_timeout = s.op_timeout;
    config.checked = s.checked;
    config.trace = s.trace.is_some();
    config.progress = s.progress;
    config.cluster_id = s.cluster_id.clone();
    let shared = config.ranks_here();
    let data = crate::segment::data_segment();
    let load_base = data.as_ref().map_or(0, |(_, b)| *b);
    let data = data.map(|(d, _)| d);
    if let Some(d) = &data {
        let ptr =
            NonNull::new(d.start as *mut u8).ok_or_else(|| anyhow::anyhow!("null data segment"))?;
        // SAFETY: the main program's writable segment lives as long as the
        // process, and `data_segment` aligns it to 8 bytes; OpenSHMEM
        // makes it symmetric memory, which peers may write at any time.
        let memory = unsafe { ForeignMemory::new(DATA_WINDOW, ptr, d.len() as u64)? };
        config.lent.push(Arc::new(memory));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("pld-shmem")
        .enable_all()
        .build()?;
    let rank = rt.block_on(Rank::start(config))?;
    let heap_id = rank.window(HEAP_WINDOW)?;
    let heap_base = rank.local(heap_id)?.base() as usize;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    if s.bind_to_core {
        let here = shared.iter().position(|r| *r == s.rank).unwrap_or(0);
        if let Err(e) = crate::bind::to_core(here) {
            tracing::warn!(error = %e, "PLD_BIND=core: the program's thread stays unbound");
        }
    }
    let progress = s.progress.on_host(shared.len(), cores);
    let near = rt.block_on(crate::near::setup(
        &rank,
        heap_id,
        heap_base,
        s.heap_size,
        heap_file,
        progress,
    ))?;
    let mut list = vec![Space {
        window: heap_id,
        base: heap_base,
        len: s.heap_size,
        what: "symmetric heap",
        reserved: RESERVED,
    }];
    if let Some(d) = data {
        list.push(Space {
            window: rank.window(DATA_WINDOW)?,
            base: d.start,
            len: d.len() as u64,
            what: "data segment",
            reserved: 0,
        });
    }
    Ok(Pe {
        rt,
        rank,
        spaces: Spaces { list },
        heap: Mutex::new(Heap::new(RESERVED, s.heap_size)),
        deferred: Mutex::new(Vec::new()),
        sync_timeout: s.sync_timeout,
        checked: s.checked != pld_server::CheckedMode::Off,
        control: s.control,
        trace: s.trace.clone(),
        finalized: AtomicBool::new(false),
        teams: Mutex::default(),
        world_team: std::sync::OnceLock::new(),
        contexts: Mutex::default(),
        shared,
        near,
        active_sets: Mutex::default(),
        load_base,
        symbols: OnceLock::new(),
    })
}

impl Pe {
    /// The embedded rank.
    pub(crate) fn rank(&self) -> &Rank {
        &self.rank
    }

    /// Every PE's heap, when the job uses shared memory.
    pub(crate) fn near(&self) -> Option<&crate::near::Near> {
        self.near.as_ref()
    }

    /// Runs `f` to completion on the PE's runtime.
    pub(crate) fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        // Most calls through shared memory, and a quiet with nothing
        // outstanding, are done at their first poll: take that without the
        // runtime's block_on machinery. A future may be polled with any
        // waker; block_on polls it again with its own.
        self.enter_runtime();
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        self.rt.block_on(f)
    }

    /// Makes the PE's runtime this thread's current one for good, once
    /// per thread: a first poll may start a timer or spawn. Entering and
    /// leaving around each call cost a fifth of a small collective's
    /// (an Arc clone and a thread-local swap each way); the program's
    /// threads run no other runtime, and `block_on` nests inside.
    fn enter_runtime(&self) {
        thread_local! {
            /// The runtime this thread entered (its address), if any.
            static ENTERED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        }
        let rt = &self.rt as *const tokio::runtime::Runtime as usize;
        if ENTERED.get() != rt {
            std::mem::forget(self.rt.enter());
            ENTERED.set(rt);
        }
    }

    /// Runs an op; its error is fatal, naming `call`.
    pub(crate) fn run<T, E: std::fmt::Display>(
        &self,
        call: &'static str,
        f: impl std::future::Future<Output = Result<T, E>>,
    ) -> T {
        match self.block(f) {
            Ok(v) => v,
            Err(e) => fatal(format!("{call}: {e}")),
        }
    }

    /// The window and offset of `len` bytes at `ptr`; fatal if they are not
    /// symmetric.
    pub(crate) fn locate(&self, call: &'static str, ptr: *const u8, len: u64) -> (WindowId, u64) {
        match self.spaces.locate(call, ptr as usize, len) {
            Ok(at) => at,
            Err(e) => fatal(e),
        }
    }

    /// The window and offset of the `size`-byte cell at `ptr` that an
    /// atomic, a signal or a wait works on: symmetric, and aligned to its
    /// size — through shared memory it is a CPU atomic, which a misaligned
    /// address makes undefined (the network path refuses it too); fatal
    /// otherwise, on either path.
    pub(crate) fn locate_cell(
        &self,
        call: &'static str,
        ptr: *const u8,
        size: usize,
    ) -> (WindowId, u64) {
        let at = self.locate(call, ptr, size as u64);
        if size.is_power_of_two() && (ptr as usize) % size != 0 {
            fatal(format!(
                "{call}: the {size}-byte variable at {ptr:p} is not aligned to {size} bytes, as an atomic or a wait needs ({})",
                crate::names::describe(self, ptr)
            ));
        }
        at
    }

    /// [`Pe::locate`] without the fatal end.
    pub(crate) fn try_locate(
        &self,
        call: &'static str,
        ptr: *const u8,
        len: u64,
    ) -> Result<(WindowId, u64), NotSymmetric> {
        self.spaces.locate(call, ptr as usize, len)
    }

    /// A PE number as a rank; fatal if there is no such PE.
    pub(crate) fn peer(&self, call: &'static str, pe: i32) -> u32 {
        match u32::try_from(pe) {
            Ok(p) if p < self.rank.nranks() => p,
            _ => fatal(format!(
                "{call}: PE {pe} does not exist (the job has PEs 0..{})",
                self.rank.nranks()
            )),
        }
    }

    /// The symmetric spaces.
    pub(crate) fn spaces(&self) -> &Spaces<WindowId> {
        &self.spaces
    }

    /// The executable's data symbol at `addr` (a runtime address), and how
    /// far into it.
    pub(crate) fn symbol_at(&self, addr: usize) -> Option<(String, u64)> {
        let syms = self.symbols.get_or_init(|| {
            std::fs::read("/proc/self/exe")
                .map(|b| crate::symbols::object_symbols(&b))
                .unwrap_or_default()
        });
        let link = (addr as u64).checked_sub(self.load_base as u64)?;
        crate::symbols::holding(syms, link).map(|(s, into)| (s.name.clone(), into))
    }

    /// The heap's base address.
    pub(crate) fn heap_base(&self) -> usize {
        self.spaces.list[0].base
    }

    /// The heap's allocator.
    pub(crate) fn heap(&self) -> std::sync::MutexGuard<'_, Heap> {
        self.heap.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long a wait or barrier may take.
    pub(crate) fn sync_timeout(&self) -> Duration {
        self.sync_timeout
    }

    /// Whether the race detector runs (`--checked`).
    pub(crate) fn checked(&self) -> bool {
        self.checked
    }

    /// Keeps a fetching op for the next quiet.
    pub(crate) fn defer(&self, d: Deferred) {
        self.deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(d);
    }

    /// Completes every deferred fetch (writing its value where the program
    /// asked), then waits for every op this PE issued: `shmem_quiet`.
    pub(crate) fn quiet(&self, call: &'static str) {
        let deferred =
            std::mem::take(&mut *self.deferred.lock().unwrap_or_else(|p| p.into_inner()));
        self.land(call, deferred);
        // Copies into shared heaps are complete once ordered before what
        // follows.
        std::sync::atomic::fence(Ordering::SeqCst);
        self.run(call, self.rank.quiet_within(self.sync_timeout));
    }

    /// Completes deferred fetches, writing each value where the program
    /// asked.
    pub(crate) fn land(&self, call: &'static str, deferred: Vec<Deferred>) {
        for d in deferred {
            match d {
                Deferred::Value { handle, to, width } => {
                    let v = self.run(call, handle.wait());
                    let bytes = v.to_le_bytes();
                    // SAFETY: `to` is the program's fetch pointer for a
                    // value of `width` bytes, as the `_nbi` call promised.
                    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), to as *mut u8, width) };
                }
                Deferred::Bytes { handle, to } => {
                    let b = self.run(call, handle.wait());
                    // SAFETY: `to` is the program's destination of
                    // `b.len()` bytes, as the `get_nbi` call promised.
                    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), to as *mut u8, b.len()) };
                }
            }
        }
    }

    /// The contexts the program created.
    pub(crate) fn contexts(&self) -> &Mutex<crate::capi::ctx::Contexts> {
        &self.contexts
    }

    /// Tells the launcher the job is to end with `status` (global_exit).
    pub(crate) fn tell_launcher(&self, status: i32) {
        if let Some(fd) = self.control {
            let line = format!("global_exit {} {status}\n", self.rank.rank());
            // SAFETY: `fd` is the pipe the launcher passed; a failed write
            // only means the launcher is gone.
            unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
        }
    }

    /// The barrier of an active set over its `pSync` cells, made on first
    /// use: the same set and array keep their barrier's epochs.
    pub(crate) fn active_sync(
        &self,
        key: ActiveSet,
        make: impl FnOnce() -> SyncArea,
    ) -> Arc<SyncArea> {
        let mut m = self.active_sets.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(key).or_insert_with(|| Arc::new(make())).clone()
    }

    /// The teams this PE belongs to.
    /// `SHMEM_TEAM_WORLD`, once `shmem_init` made it.
    pub(crate) fn world_team(&self) -> Option<&std::sync::Arc<crate::team::Team>> {
        self.world_team.get()
    }

    pub(crate) fn teams(&self) -> std::sync::MutexGuard<'_, crate::team::Teams> {
        self.teams.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The heap window.
    pub(crate) fn heap_window(&self) -> WindowId {
        self.spaces.list[0].window
    }

    /// Ends the PE: quiet, a last barrier, then the rank closes its links
    /// so that peers see it leave. Idempotent.
    pub(crate) fn finalize(&self) {
        if self.finalized.swap(true, Ordering::AcqRel) {
            return;
        }
        self.quiet("shmem_finalize");
        self.run("shmem_finalize", self.rank.barrier());
        let races = crate::names::report_races(self);
        if let (Some(path), Some(t)) = (&self.trace, self.rank.trace())
            && let Err(e) = std::fs::write(path, t.to_json())
        {
            crate::say::line(format_args!(
                "PE {}: could not write its trace to {}: {e}",
                self.rank.rank(),
                path.display()
            ));
        }
        self.block(self.rank.shutdown());
        if races > 0 {
            fatal(format!(
                "--checked: {races} races in this PE's symmetric memory, reported above"
            ));
        }
    }
}
