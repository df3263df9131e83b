//! The single-cell ops of a window: elementwise atomic add of a range,
//! fetch_add and compare_swap on an int32/int64 cell, and the int32 signal
//! cells of notify, wait and test. Each is a hardware atomic on the cell
//! (no lock); only a float add takes its stripe's lock (`window::atomic`).

use super::{Window, atomic};
use crate::error::AccessError;
use pld_proto::cell::{CellOp, next_value};
use pld_proto::{Dtype, NotifyOp, OpKind};

impl Window {
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

    /// Applies a single-cell atomic (swap, fetch, set, and / or / xor) to
    /// an int32/int64 cell; returns the previous value.
    pub fn cell_op(&self, offset: u64, dtype: Dtype, op: CellOp) -> Result<i64, AccessError> {
        let at = self.check_cell(op.kind(), offset, dtype)?;
        check_fits(op.kind(), dtype, op.value())?;
        // SAFETY: checked in bounds and aligned for `dtype`.
        let previous = self.with_cell(at, |p| unsafe { atomic::cell_op(p, dtype, op) });
        if next_value(op, 0).is_some() {
            self.board.changed();
        }
        Ok(previous)
    }

    /// Sets or atomically adds to the 8-byte signal cell of a put-with-signal
    /// (OpenSHMEM's `uint64_t` signals): with release ordering, so that a
    /// rank that reads the new signal reads the data written before it.
    pub fn signal64(&self, offset: u64, op: NotifyOp, value: u64) -> Result<(), AccessError> {
        let at = self.check_elems(offset, 8, Dtype::Int64)?.start;
        if !matches!(op, NotifyOp::Set | NotifyOp::AtomicAdd) {
            return Err(AccessError::InvalidNotifyOp { value: op as i32 });
        }
        // SAFETY: checked in bounds and 8-byte aligned.
        self.with_cell(at, |p| unsafe { atomic::signal64(p, op, value) });
        self.board.changed();
        Ok(())
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
