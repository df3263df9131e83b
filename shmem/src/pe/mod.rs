//! The processing element: one per process, made by `shmem_init`. It owns
//! the embedded pld rank, the runtime that serves the rank's peers while
//! the program computes, the symmetric spaces and the heap's allocator.
//! What the job keeps beside it (teams, contexts, active sets) and the
//! static the C entry points reach it through are in [`crate::job`].

mod describe;
mod start;

pub(crate) use start::start;

use crate::addr::{NotSymmetric, Spaces};
use crate::fatal::fatal;
use crate::heap::Heap;
use pld_server::{Rank, WindowId};
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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
    /// The PEs on this host: `SHMEM_TEAM_SHARED`.
    shared: Vec<u32>,
    /// Every PE's heap, mapped, when the job uses shared memory.
    near: Option<crate::near::Near>,
    /// What the executable's link-time addresses are offset by.
    load_base: usize,
    /// The executable's data symbols, read when a message first needs one.
    symbols: OnceLock<Vec<crate::symbols::Symbol>>,
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
                self.describe(ptr)
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

    /// Tells the launcher the job is to end with `status` (global_exit).
    pub(crate) fn tell_launcher(&self, status: i32) {
        if let Some(fd) = self.control {
            let line = format!("global_exit {} {status}\n", self.rank.rank());
            // SAFETY: `fd` is the pipe the launcher passed; a failed write
            // only means the launcher is gone.
            unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
        }
    }

    /// The heap window.
    pub(crate) fn heap_window(&self) -> WindowId {
        self.spaces.list[0].window
    }

    /// The PEs on this host, in rank order: `SHMEM_TEAM_SHARED`.
    pub(crate) fn shared(&self) -> &[u32] {
        &self.shared
    }

    /// Marks the PE finalized; whether it already was.
    pub(crate) fn mark_finalized(&self) -> bool {
        self.finalized.swap(true, Ordering::AcqRel)
    }

    /// Whether `shmem_finalize` (or the exit handler) has run.
    pub(crate) fn is_finalized(&self) -> bool {
        self.finalized.load(Ordering::Acquire)
    }

    /// `PLD_TRACE`: where `shmem_finalize` writes the timeline.
    pub(crate) fn trace_path(&self) -> Option<&std::path::Path> {
        self.trace.as_deref()
    }
}
