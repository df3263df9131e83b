//! What a PE does to a heap it maps: copies, the rank's own single-cell
//! kernels (`pld_server::window::atomic`, so that an atomic is the same
//! instruction whichever way it arrives), and waits that look at memory.

use super::Near;
use pld_proto::{CellOp, Dtype, NotifyOp};
use pld_server::window::atomic;
use pld_server::{Progress, WindowId};
use std::time::{Duration, Instant};

/// A single-cell atomic.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Amo {
    /// Add, returning the old value.
    FetchAdd(i64),
    /// Compare and swap, returning the old value.
    CompareSwap {
        /// The value the cell must hold.
        expected: i64,
        /// What it then holds.
        desired: i64,
    },
    /// Swap, fetch, set and the bitwise ops.
    Cell(CellOp),
}

/// How long a wait under `--progress sleep` looks before it sleeps: an
/// answer from a PE running on another core arrives in about this time.
const SLEEP_SPIN: Duration = Duration::from_micros(5);

/// Looks at memory between readings of the clock while spinning.
const SPINS_PER_LOOK: u32 = 32;

impl Near {
    /// Writes `data` at `off` of `win` on `peer`; false if it is not there.
    pub(crate) fn put(&self, peer: u32, win: WindowId, off: u64, data: &[u8]) -> bool {
        let Some(to) = self.at(peer, win, off, data.len() as u64) else {
            return false;
        };
        // SAFETY: `to` is inside `peer`'s heap mapping, valid for the
        // length; `ptr::copy`, as the source may be the same memory.
        unsafe { std::ptr::copy(data.as_ptr(), to, data.len()) };
        self.ring(peer);
        true
    }

    /// Reads `out.len()` bytes at `off` of `win` on `peer` into `out`; false
    /// if they are not there.
    pub(crate) fn get(&self, peer: u32, win: WindowId, off: u64, out: &mut [u8]) -> bool {
        let Some(from) = self.at(peer, win, off, out.len() as u64) else {
            return false;
        };
        // SAFETY: `from` is inside `peer`'s heap mapping, valid for the
        // length; `out` is the caller's, possibly the same memory.
        unsafe { std::ptr::copy(from, out.as_mut_ptr(), out.len()) };
        true
    }

    /// `amo` on the int32 or int64 cell at `off` of `win` on `peer`: the old
    /// value, or None if the cell is not in a mapped heap.
    pub(crate) fn amo(
        &self,
        peer: u32,
        win: WindowId,
        off: u64,
        dtype: Dtype,
        amo: Amo,
    ) -> Option<i64> {
        let at = self.at(peer, win, off, dtype.size() as u64)?;
        // SAFETY: `at` is an aligned cell of the dtype's width (the callers
        // locate typed, aligned symmetric objects) in a live mapping.
        let old = unsafe {
            match amo {
                Amo::FetchAdd(v) => atomic::fetch_add(at, dtype, v),
                Amo::CompareSwap { expected, desired } => {
                    atomic::compare_swap(at, dtype, expected, desired)
                }
                Amo::Cell(op) => atomic::cell_op(at, dtype, op),
            }
        };
        self.ring(peer);
        Some(old)
    }

    /// Sets or adds to the 8-byte signal at `off` of `win` on `peer`,
    /// after what came before it; false if it is not in a mapped heap.
    pub(crate) fn signal(&self, peer: u32, win: WindowId, off: u64, op: NotifyOp, v: u64) -> bool {
        let Some(at) = self.at(peer, win, off, 8) else {
            return false;
        };
        // SAFETY: an aligned 8-byte symmetric signal in a live mapping.
        unsafe { atomic::signal64(at, op, v) };
        self.ring(peer);
        true
    }

    /// Waits until `ready()` holds (true) or `deadline` passes (false),
    /// this PE being `me`: looks at memory — spinning under `--progress
    /// spin` for its idle time (yielding the core when PEs outnumber
    /// cores), a few microseconds under `sleep` — then sleeps on its
    /// doorbell, which writers ring.
    pub(crate) fn wait(&self, me: u32, deadline: Instant, mut ready: impl FnMut() -> bool) -> bool {
        let (look, yielding) = match self.progress {
            Progress::Sleep => (SLEEP_SPIN, false),
            Progress::Spin {
                idle,
                oversubscribed,
            } => (idle, oversubscribed),
        };
        // A few looks before the first reading of the clock.
        for _ in 0..16 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        let look_until = deadline.min(Instant::now() + look);
        let mut i = 0u32;
        loop {
            if ready() {
                return true;
            }
            i = i.wrapping_add(1);
            // Where PEs outnumber cores, the PE being waited for may need
            // this very core: yield it at every look (a microsecond of
            // spinning between yields measured 2-3x slower at 4 PEs on 2
            // cores).
            if yielding {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            if (yielding || i % SPINS_PER_LOOK == 0) && Instant::now() >= look_until {
                break;
            }
        }
        let left = || {
            let left = deadline.saturating_duration_since(Instant::now());
            (!left.is_zero()).then_some(left)
        };
        self.mine(me).sleep_until(left, &mut ready)
    }
}
