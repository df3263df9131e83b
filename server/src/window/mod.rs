//! Window memory: owned by the rank, zero-initialised, bounds-checked.
//!
//! # Concurrency model
//!
//! A window is memory that many peers reach at once, as in MPI RMA and
//! OpenSHMEM. There is no lock: concurrent puts to disjoint ranges proceed in
//! parallel, and atomics are single hardware atomic instructions (or CAS loops
//! for floating point) on naturally aligned cells, so any number of ranks can
//! add to the same cells without losing an update.
//!
//! Plain reads and writes copy bytes through raw pointers; no Rust reference
//! to window memory ever outlives one copy. A program that lets a put race a
//! get or a put of the same bytes without ordering them (barrier, signal,
//! quiet) reads undefined *values* — exactly as MPI and OpenSHMEM define
//! it — but every access stays inside the window, which the checks below
//! guarantee before any byte moves.

mod atomic;
mod board;

pub use board::ChangeBoard;

use crate::error::{AccessError, ConfigError};
use pld_proto::lock::Locked;
use pld_proto::v1::WindowSpec;
use pld_proto::{Dtype, NotifyOp, OpKind};
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;

/// A region of a window that passed the checks: where its rows are, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rows {
    start: usize,
    rows: usize,
    row_bytes: usize,
    stride_bytes: usize,
}

impl Rows {
    /// Bytes the region holds (its packed size).
    pub fn len(&self) -> usize {
        self.rows * self.row_bytes
    }

    /// Whether the region holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The byte range of row `i` in the window.
    fn row(&self, i: usize) -> Range<usize> {
        let at = self.start + i * self.stride_bytes;
        at..at + self.row_bytes
    }

    /// The window bytes the region covers, rows that touch merged (checked
    /// mode records accesses by byte range).
    pub(crate) fn byte_ranges(&self) -> Vec<Range<u64>> {
        if self.stride_bytes == self.row_bytes || self.rows <= 1 {
            let len = (self.rows * self.row_bytes) as u64;
            let whole = self.start as u64..self.start as u64 + len;
            return std::iter::once(whole).collect();
        }
        (0..self.rows)
            .map(|i| {
                let r = self.row(i);
                r.start as u64..r.end as u64
            })
            .collect()
    }

    fn rows(self) -> impl Iterator<Item = Range<usize>> {
        (0..self.rows).map(move |i| self.row(i))
    }
}

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
    layout: Layout,
    board: Arc<ChangeBoard>,
    /// One lock per `STRIPE` bytes: every mutating atomic holds the lock of
    /// the stripe it touches (see `window::atomic`).
    stripes: Box<[std::sync::Mutex<()>]>,
}

/// Bytes of window memory per atomics lock: a multiple of every element
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
        // SAFETY: allocated in `Window::new` with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
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
        let stripes = (0..size.div_ceil(STRIPE))
            .map(|_| std::sync::Mutex::new(()))
            .collect();
        Ok(Window {
            name: name.to_string(),
            ptr,
            size,
            layout,
            board,
            stripes,
        })
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
        // Sizes are powers of two: a mask, not a division (~40 instructions).
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

    /// Adds `operands` (elements of `dtype`) to the bytes at `range`, stripe
    /// by stripe under the stripes' locks.
    fn add_range(&self, range: Range<usize>, dtype: Dtype, operands: &[u8]) {
        let start = range.start;
        self.for_each_stripe(range, |part| {
            let src = &operands[part.start - start..part.end - start];
            // SAFETY: `part` lies inside the window (the callers checked the
            // whole range) and starts at an element boundary; its stripe's
            // lock is held.
            unsafe { atomic::add_locked(self.ptr.as_ptr().add(part.start), dtype, src) };
        });
    }

    /// Runs a single-cell atomic under the lock of the cell's stripe.
    fn with_cell<R>(&self, at: usize, f: impl FnOnce(*mut u8) -> R) -> R {
        let _held = self.stripes[at / STRIPE].locked();
        // The cell is inside the window: the callers checked it.
        f(self.ptr.as_ptr().wrapping_add(at))
    }

    /// Checks a 2-D region of `region.dtype` elements that starts at byte
    /// `offset`: the dtype, the alignment, the row stride and every row's
    /// bounds.
    pub fn check_region(
        &self,
        offset: u64,
        region: &pld_proto::v1::Region,
    ) -> Result<Rows, AccessError> {
        use pld_proto::region::{Layout, Shape};
        let dtype = Dtype::from_wire(region.dtype).ok_or(AccessError::UnknownDtype {
            value: region.dtype,
        })?;
        let elem = dtype.size() as u64;
        if offset % elem != 0 {
            return Err(AccessError::MisalignedOffset {
                window: self.name.clone(),
                offset,
                dtype,
                size: elem as usize,
            });
        }
        let shape = Shape {
            rows: region.rows,
            cols: region.cols,
        };
        let layout = Layout {
            offset: 0,
            row_stride: region.row_stride,
        };
        let bad = |reason: String| AccessError::BadRegion { reason };
        let span = layout
            .span(shape)
            .map_err(|e| bad(e.to_string()))?
            .checked_mul(elem)
            .ok_or_else(|| bad("the region's extent overflows".into()))?;
        let r = self.check_range(offset, span)?;
        let row_bytes = region.cols.saturating_mul(elem);
        let stride_bytes = region.row_stride.saturating_mul(elem);
        Ok(Rows {
            start: r.start,
            rows: if span == 0 { 0 } else { region.rows as usize },
            row_bytes: row_bytes as usize,
            stride_bytes: if region.rows <= 1 {
                row_bytes as usize
            } else {
                stride_bytes as usize
            },
        })
    }

    /// `len` contiguous bytes at `offset`, as one row.
    pub fn check_contiguous(&self, offset: u64, len: u64) -> Result<Rows, AccessError> {
        let r = self.check_range(offset, len)?;
        Ok(Rows {
            start: r.start,
            rows: 1,
            row_bytes: r.len(),
            stride_bytes: r.len(),
        })
    }

    fn check_payload(rows: Rows, payload: &[u8]) -> Result<(), AccessError> {
        if payload.len() != rows.len() {
            return Err(AccessError::PayloadLength {
                expected: rows.len() as u64,
                got: payload.len() as u64,
            });
        }
        Ok(())
    }

    /// Scatters `payload` (the region's rows, packed) into the region.
    pub fn write_rows(&self, rows: Rows, payload: &[u8]) -> Result<(), AccessError> {
        Self::check_payload(rows, payload)?;
        for (r, src) in rows.rows().zip(payload.chunks_exact(rows.row_bytes.max(1))) {
            // SAFETY: `rows` was checked against this window's bounds.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(r.start), r.len())
            };
        }
        self.board.changed();
        Ok(())
    }

    /// Gathers the region's rows, packed, into `out`.
    pub fn read_rows_into(&self, rows: Rows, out: &mut [u8]) -> Result<(), AccessError> {
        Self::check_payload(rows, out)?;
        for (r, dst) in rows.rows().zip(out.chunks_exact_mut(rows.row_bytes.max(1))) {
            // SAFETY: as in `write_rows`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.ptr.as_ptr().add(r.start),
                    dst.as_mut_ptr(),
                    r.len(),
                )
            };
        }
        Ok(())
    }

    /// The region's rows as raw memory, for reading payloads straight into
    /// the window or writing them straight from it.
    pub(crate) fn raw_rows(&self, rows: Rows) -> impl Iterator<Item = crate::transport::Raw> + '_ {
        rows.rows().map(move |r| crate::transport::Raw {
            ptr: self.ptr.as_ptr().wrapping_add(r.start),
            len: r.len(),
        })
    }

    /// Tells waiters that bytes changed (after a write through `raw_rows`).
    pub(crate) fn changed(&self) {
        self.board.changed();
    }

    /// Appends the region's rows, packed, to `out` (one copy, no zero fill).
    pub fn append_rows(&self, rows: Rows, out: &mut bytes::BytesMut) {
        out.reserve(rows.len());
        let start = out.len();
        let dst = out.spare_capacity_mut().as_mut_ptr().cast::<u8>();
        let mut written = 0;
        for r in rows.rows() {
            // SAFETY: `rows` was checked against this window's bounds, and
            // `reserve` made room for all of them after `out`'s bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.ptr.as_ptr().add(r.start),
                    dst.add(written),
                    r.len(),
                )
            };
            written += r.len();
        }
        // SAFETY: the `written` bytes after `start` were just initialised.
        unsafe { out.set_len(start + written) };
    }

    /// Elementwise atomic add of `payload` (packed rows of `dtype`) into the region.
    pub fn atomic_add_rows(
        &self,
        rows: Rows,
        dtype: Dtype,
        payload: &[u8],
    ) -> Result<(), AccessError> {
        Self::check_payload(rows, payload)?;
        for (r, src) in rows.rows().zip(payload.chunks_exact(rows.row_bytes.max(1))) {
            // Rows start at multiples of the element size (offset and
            // stride are in elements) and were checked in bounds.
            self.add_range(r, dtype, src);
        }
        self.board.changed();
        Ok(())
    }

    /// Writes `data` at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), AccessError> {
        let r = self.check_range(offset, data.len() as u64)?;
        // SAFETY: `r` lies inside the allocation (checked above) and `data`
        // cannot overlap window memory handed out as a Rust slice (none is).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(r.start), r.len())
        };
        self.board.changed();
        Ok(())
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    pub fn read_into(&self, offset: u64, out: &mut [u8]) -> Result<(), AccessError> {
        let r = self.check_range(offset, out.len() as u64)?;
        // SAFETY: as in `write`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(r.start), out.as_mut_ptr(), r.len())
        };
        Ok(())
    }

    /// Reads `len` bytes at `offset` into a new buffer.
    pub fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>, AccessError> {
        self.check_range(offset, len)?;
        let mut out = vec![0u8; len as usize];
        self.read_into(offset, &mut out)?;
        Ok(out)
    }

    /// Elementwise `window[offset..] += operands`, atomic per element.
    /// `operands` holds little-endian elements of `dtype`.
    pub fn atomic_add(
        &self,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<(), AccessError> {
        let r = self.check_elems(offset, operands.len() as u64, dtype)?;
        self.add_range(r, dtype, operands);
        self.board.changed();
        Ok(())
    }

    /// Checks a single-cell atomic (fetch_add, compare_swap) on an int32/int64 cell.
    pub fn check_cell(&self, op: OpKind, offset: u64, dtype: Dtype) -> Result<usize, AccessError> {
        if !matches!(dtype, Dtype::Int32 | Dtype::Int64) {
            return Err(AccessError::UnsupportedDtype {
                op,
                dtype,
                supported: "int32 or int64",
            });
        }
        Ok(self.check_elems(offset, dtype.size() as u64, dtype)?.start)
    }

    /// Atomically adds `value` to an int32/int64 cell (wrapping); returns the
    /// previous value. For an int32 cell the value must fit in int32.
    pub fn fetch_add(&self, offset: u64, dtype: Dtype, value: i64) -> Result<i64, AccessError> {
        let at = self.check_cell(OpKind::FetchAdd, offset, dtype)?;
        check_fits(OpKind::FetchAdd, dtype, value)?;
        // SAFETY: checked in bounds and aligned for `dtype`.
        let previous = self.with_cell(at, |p| unsafe { atomic::fetch_add(p, dtype, value) });
        self.board.changed();
        Ok(previous)
    }

    /// Atomically replaces an int32/int64 cell holding `expected` by
    /// `desired`; returns the previous value.
    pub fn compare_swap(
        &self,
        offset: u64,
        dtype: Dtype,
        expected: i64,
        desired: i64,
    ) -> Result<i64, AccessError> {
        let at = self.check_cell(OpKind::CompareSwap, offset, dtype)?;
        check_fits(OpKind::CompareSwap, dtype, expected)?;
        check_fits(OpKind::CompareSwap, dtype, desired)?;
        // SAFETY: checked in bounds and aligned for `dtype`.
        let previous = self.with_cell(at, |p| unsafe {
            atomic::compare_swap(p, dtype, expected, desired)
        });
        self.board.changed();
        Ok(previous)
    }

    /// Checks a notify on an int32 signal cell.
    pub fn check_signal(&self, offset: u64) -> Result<usize, AccessError> {
        Ok(self.check_elems(offset, 4, Dtype::Int32)?.start)
    }

    /// Sets or atomically adds to an int32 signal cell.
    pub fn notify(&self, offset: u64, op: NotifyOp, value: i32) -> Result<(), AccessError> {
        let at = self.check_signal(offset)?;
        if op == NotifyOp::Unspecified {
            return Err(AccessError::InvalidNotifyOp { value: op as i32 });
        }
        self.with_cell(at, |p| {
            // SAFETY: checked in bounds and 4-byte aligned.
            let cell = unsafe { atomic::signal_cell(p) };
            match op {
                NotifyOp::AtomicAdd => {
                    cell.fetch_add(value, std::sync::atomic::Ordering::AcqRel);
                }
                _ => cell.store(value, std::sync::atomic::Ordering::Release),
            }
        });
        self.board.changed();
        Ok(())
    }

    /// Atomically reads an int32 signal cell.
    pub fn load_signal(&self, offset: u64) -> Result<i32, AccessError> {
        let at = self.check_signal(offset)?;
        // SAFETY: checked in bounds and 4-byte aligned.
        let cell = unsafe { atomic::signal_cell(self.ptr.as_ptr().add(at)) };
        Ok(cell.load(std::sync::atomic::Ordering::Acquire))
    }
}

/// An operand of a single-cell atomic must fit the cell's dtype.
pub fn check_fits(op: OpKind, dtype: Dtype, value: i64) -> Result<(), AccessError> {
    if dtype == Dtype::Int32 && i32::try_from(value).is_err() {
        return Err(AccessError::ValueOutOfRange { op, dtype, value });
    }
    Ok(())
}

/// A rank's windows, sorted by name; a window's id is its index.
#[derive(Debug)]
pub struct Windows {
    list: Vec<Window>,
    board: Arc<ChangeBoard>,
}

impl Windows {
    /// Allocates the windows (sorted by name).
    pub fn new(specs: &[(String, u64)]) -> Result<Windows, ConfigError> {
        let mut specs = specs.to_vec();
        specs.sort();
        let board = Arc::new(ChangeBoard::default());
        let list = specs
            .iter()
            .map(|(n, s)| Window::with_board(n, *s, board.clone()))
            .collect::<Result<_, _>>()?;
        Ok(Windows { list, board })
    }

    /// What wakes waiters when any of these windows changes.
    pub fn board(&self) -> &ChangeBoard {
        &self.board
    }

    /// The window with id `id`.
    pub fn get(&self, id: u32) -> Result<&Window, AccessError> {
        self.list
            .get(id as usize)
            .ok_or(AccessError::UnknownWindow {
                id,
                count: self.list.len(),
            })
    }

    /// The id of the window called `name`.
    pub fn id_of(&self, name: &str) -> Option<u32> {
        self.list
            .binary_search_by(|w| w.name.as_str().cmp(name))
            .ok()
            .map(|i| i as u32)
    }

    /// The windows, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Window> {
        self.list.iter()
    }

    /// The names, comma-separated, for messages.
    pub fn names(&self) -> String {
        self.list
            .iter()
            .map(|w| format!("'{}'", w.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The specs as they go into a handshake.
    pub fn specs(&self) -> Vec<WindowSpec> {
        self.list
            .iter()
            .map(|w| WindowSpec {
                name: w.name.clone(),
                size: w.size(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
