//! Window memory: owned by the rank, zero-initialised, bounds-checked.
//!
//! # Concurrency model
//!
//! A window is memory that many peers reach at once, as in MPI RMA and
//! OpenSHMEM. Data takes no lock: concurrent puts to disjoint ranges
//! proceed in parallel. Integer atomics (elementwise adds, the single-cell
//! ops, signals) are the hardware's atomic read-modify-writes and take no
//! lock either, so they agree with the same instructions applied through
//! a mapping by another process; a float add holds the lock of the 64 KiB
//! stripe it touches (see `window::atomic`). Either way any number of
//! ranks can add to the same cells without losing an update.
//!
//! Plain reads and writes copy bytes through raw pointers; no Rust reference
//! to window memory ever outlives one copy. A program that lets a put race a
//! get or a put of the same bytes without ordering them (barrier, signal,
//! quiet) reads undefined *values* — exactly as MPI and OpenSHMEM define
//! it — but every access stays inside the window, which the checks below
//! guarantee before any byte moves.

//!
//! - this file: a [`Window`] — its memory, its bounds and alignment checks,
//!   the striped locks its float adds take;
//! - `rows`: regions of a window ([`Rows`]): checked, written, read;
//! - `cells`: the single-cell ops — fetching atomics, signals;
//! - `set`: a rank's [`Windows`], by name and id;
//! - `atomic`: the dtype atomics themselves; `board`: waking waiters.

// Public for embedders that apply the same single-cell kernels to symmetric
// memory they reach directly (pld-shmem between PEs of one host), so that
// an atomic means the same instructions whichever way it arrives.
pub mod atomic;
pub mod board;
mod cells;
mod rows;
mod set;

pub use board::ChangeBoard;
pub use cells::check_fits;
pub use rows::Rows;
pub use set::Windows;

use crate::error::{AccessError, ConfigError};
use pld_proto::Dtype;
use pld_proto::lock::Locked;
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;

pub use crate::lent::ForeignMemory;

/// Alignment of every window's base address: enough for every element
/// type (8 bytes at most), so that element offsets that are multiples of
/// their size are naturally aligned. No more than 16, so that the allocator
/// can hand out zeroed pages lazily (calloc) rather than write every byte.
const WINDOW_ALIGN: usize = 16;

/// One named window.
pub struct Window {
    name: String,
    ptr: NonNull<u8>,
    size: usize,
    /// `None` for memory the process lent ([`ForeignMemory`]): not ours
    /// to free.
    layout: Option<Layout>,
    board: Arc<ChangeBoard>,
    /// One lock per `STRIPE` bytes: a float add holds the lock of the
    /// stripe it touches (see `window::atomic`).
    stripes: Box<[std::sync::Mutex<()>]>,
}

/// Bytes of window memory per float-add lock: a multiple of every element
/// size, so that no element straddles two stripes.
const STRIPE: usize = 64 * 1024;

// SAFETY: the window is a raw allocation owned by this struct; all access goes
// through bounds-checked copies and atomics (see the module docs).
unsafe impl Send for Window {}
// SAFETY: as above; shared access is the point of a window.
unsafe impl Sync for Window {}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("name", &self.name)
            .field("size", &self.size)
            .finish()
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            // SAFETY: allocated in `Window::with_board` with exactly this layout.
            unsafe { dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

impl Window {
    /// Allocates a zeroed window. Fails (rather than aborting) when the
    /// memory is not available.
    pub fn new(name: &str, size: u64) -> Result<Window, ConfigError> {
        Self::with_board(name, size, Arc::default())
    }

    /// A window whose changes wake the waiters of `board`.
    pub fn with_board(
        name: &str,
        size: u64,
        board: Arc<ChangeBoard>,
    ) -> Result<Window, ConfigError> {
        let fail = || ConfigError::WindowAlloc {
            name: name.to_string(),
            size,
        };
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s > 0)
            .ok_or_else(fail)?;
        let layout = Layout::from_size_align(size, WINDOW_ALIGN).map_err(|_| fail())?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(fail)?;
        Ok(Self::over(name, ptr, size, Some(layout), board))
    }

    /// A window over lent memory (see [`ForeignMemory`]).
    pub(crate) fn lent(memory: &ForeignMemory, board: Arc<ChangeBoard>) -> Window {
        let (ptr, size) = memory.range();
        Self::over(memory.name(), ptr, size, None, board)
    }

    fn over(
        name: &str,
        ptr: NonNull<u8>,
        size: usize,
        layout: Option<Layout>,
        board: Arc<ChangeBoard>,
    ) -> Window {
        let stripes = (0..size.div_ceil(STRIPE))
            .map(|_| std::sync::Mutex::new(()))
            .collect();
        Window {
            name: name.to_string(),
            ptr,
            size,
            layout,
            board,
            stripes,
        }
    }

    /// The address of the window's first byte: for a program that embeds
    /// the rank and reads its own window in place (OpenSHMEM's symmetric
    /// heap). Access through it follows the module's concurrency model.
    pub fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The window's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size as u64
    }

    /// Checks that `len` bytes at `offset` lie inside the window.
    #[inline]
    pub fn check_range(&self, offset: u64, len: u64) -> Result<Range<usize>, AccessError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size as u64 => Ok(offset as usize..end as usize),
            _ => Err(self.out_of_bounds(offset, len)),
        }
    }

    /// The error of a range that does not fit (kept out of line: every op
    /// checks its range, and the check itself is two compares).
    #[cold]
    fn out_of_bounds(&self, offset: u64, len: u64) -> AccessError {
        AccessError::OutOfBounds {
            window: self.name.clone(),
            offset,
            len,
            size: self.size as u64,
        }
    }

    /// Checks alignment to `dtype`'s element size, then bounds.
    pub fn check_elems(
        &self,
        offset: u64,
        len: u64,
        dtype: Dtype,
    ) -> Result<Range<usize>, AccessError> {
        // Sizes are powers of two: a mask, not a division (every op checks).
        let (size, mask) = (dtype.size(), (dtype.size() as u64).wrapping_sub(1));
        if offset & mask != 0 {
            return Err(AccessError::MisalignedOffset {
                window: self.name.clone(),
                offset,
                dtype,
                size,
            });
        }
        if len & mask != 0 {
            return Err(AccessError::MisalignedLength { len, dtype, size });
        }
        self.check_range(offset, len)
    }

    /// Runs `f` on the part of `range` in each stripe, holding that
    /// stripe's lock — one lock at a time, so never a deadlock.
    fn for_each_stripe(&self, range: Range<usize>, mut f: impl FnMut(Range<usize>)) {
        let mut at = range.start;
        while at < range.end {
            let stripe = at / STRIPE;
            let end = range.end.min((stripe + 1) * STRIPE);
            let _held = self.stripes[stripe].locked();
            f(at..end);
            at = end;
        }
    }

    /// Adds `operands` (elements of `dtype`) to the bytes at `range`:
    /// integers with the hardware's atomic adds, floats stripe by stripe
    /// under the stripes' locks.
    fn add_range(&self, range: Range<usize>, dtype: Dtype, operands: &[u8]) {
        if atomic::add_is_lock_free(dtype) {
            // SAFETY: `range` lies inside the window (the callers checked
            // it) and starts at an element boundary.
            unsafe { atomic::add_integers(self.ptr.as_ptr().add(range.start), dtype, operands) };
            return;
        }
        let start = range.start;
        self.for_each_stripe(range, |part| {
            let src = &operands[part.start - start..part.end - start];
            // SAFETY: `part` lies inside the window (the callers checked the
            // whole range) and starts at an element boundary; its stripe's
            // lock is held.
            unsafe { atomic::add_floats_locked(self.ptr.as_ptr().add(part.start), dtype, src) };
        });
    }

    /// Runs a single-cell atomic: a hardware read-modify-write, no lock.
    fn with_cell<R>(&self, at: usize, f: impl FnOnce(*mut u8) -> R) -> R {
        // The cell is inside the window: the callers checked it.
        f(self.ptr.as_ptr().wrapping_add(at))
    }
}

#[cfg(test)]
mod tests;
