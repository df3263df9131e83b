//! Per-element atomic kernels on window memory.
//!
//! Integer atomics are the hardware's: an elementwise integer add is a
//! `fetch_add` per element (`lock xadd`), and the single-cell ops and
//! signals are atomic read-modify-writes, none under a lock. So an integer
//! atomic that another process applies through a mapping of the same
//! memory (pld-shmem between the PEs of one host) with the same
//! instructions cannot lose an update against one this rank serves.
//!
//! Float adds (fp32, fp64, fp16, bf16) are always applied by the window's
//! owner, under the lock of the 64 KiB stripe they touch (see
//! `Window::for_each_stripe`): inside a stripe an element add is a plain
//! load, add and store — relaxed atomics, which compile to ordinary moves,
//! so that a concurrent `wait` reading the cell atomically is never a data
//! race — with no compare-and-swap loop, which would cost a bulk add of
//! floats over ten times as much. No path adds floats through a mapping.
//! fp16 and bf16 add in fp32 and round back to nearest even: fp32 carries
//! more than 2p+2 bits for both (p = 11 and 8), so the double rounding
//! gives the correctly rounded sum.

use half::{bf16, f16};
use pld_proto::{BitOp, CellOp, Dtype, NotifyOp};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{
    AtomicI8, AtomicI16, AtomicI32, AtomicI64, AtomicU16, AtomicU32, AtomicU64, fence,
};

/// Applies `f` to each `N`-byte element of `operands` and the matching cell.
///
/// # Safety
/// `dst` must be valid for `operands.len()` bytes and aligned to `N`.
unsafe fn each<const N: usize>(dst: *mut u8, operands: &[u8], mut f: impl FnMut(*mut u8, [u8; N])) {
    for (i, chunk) in operands.chunks_exact(N).enumerate() {
        let bytes: [u8; N] = std::array::from_fn(|k| chunk[k]);
        // SAFETY: i * N + N <= operands.len(), inside `dst`'s range.
        f(unsafe { dst.add(i * N) }, bytes);
    }
}

macro_rules! add_as {
    ($atomic:ty, $n:literal, $dst:expr, $ops:expr, |$cur:ident, $b:ident| $sum:expr) => {
        // SAFETY: the caller's contract: valid, aligned cells for $n-byte elements.
        unsafe {
            each::<$n>($dst, $ops, |p, $b| {
                let cell = <$atomic>::from_ptr(p.cast());
                let $cur = cell.load(Relaxed);
                cell.store($sum, Relaxed);
            })
        }
    };
}

macro_rules! fetch_add_as {
    ($atomic:ty, $int:ty, $n:literal, $dst:expr, $ops:expr) => {
        // SAFETY: the caller's contract: valid, aligned cells for $n-byte elements.
        unsafe {
            each::<$n>($dst, $ops, |p, b| {
                <$atomic>::from_ptr(p.cast()).fetch_add(<$int>::from_le_bytes(b), Relaxed);
            })
        }
    };
}

/// Whether `dtype`'s adds are the hardware's atomic adds, which need no
/// lock (the integers); the others are applied under the stripe's lock.
pub(super) fn add_is_lock_free(dtype: Dtype) -> bool {
    matches!(
        dtype,
        Dtype::Int8 | Dtype::Int16 | Dtype::Int32 | Dtype::Int64
    )
}

/// Elementwise `dst += operands` for an integer `dtype` (wrapping): one
/// atomic add per element, no lock.
///
/// # Safety
/// `dst` must be valid for `operands.len()` bytes and aligned to
/// `dtype.size()`; `operands.len()` must be a multiple of it; `dtype` is
/// one that [`add_is_lock_free`] takes.
pub unsafe fn add_integers(dst: *mut u8, dtype: Dtype, operands: &[u8]) {
    match dtype {
        Dtype::Int8 => fetch_add_as!(AtomicI8, i8, 1, dst, operands),
        Dtype::Int16 => fetch_add_as!(AtomicI16, i16, 2, dst, operands),
        Dtype::Int32 => fetch_add_as!(AtomicI32, i32, 4, dst, operands),
        Dtype::Int64 => fetch_add_as!(AtomicI64, i64, 8, dst, operands),
        // Not integers: the caller adds them under the stripe's lock.
        _ => {}
    }
    // Publish the whole region before the ack that follows.
    fence(Release);
}

/// Elementwise `dst += operands` for a float `dtype`, with the stripe lock
/// held.
///
/// # Safety
/// `dst` must be valid for `operands.len()` bytes and aligned to
/// `dtype.size()`; `operands.len()` must be a multiple of it; the lock of
/// the stripe that holds the range must be held.
pub(super) unsafe fn add_floats_locked(dst: *mut u8, dtype: Dtype, operands: &[u8]) {
    match dtype {
        Dtype::Fp32 => add_as!(AtomicU32, 4, dst, operands, |c, b| {
            (f32::from_bits(c) + f32::from_le_bytes(b)).to_bits()
        }),
        Dtype::Fp64 => add_as!(AtomicU64, 8, dst, operands, |c, b| {
            (f64::from_bits(c) + f64::from_le_bytes(b)).to_bits()
        }),
        Dtype::Fp16 => add_as!(AtomicU16, 2, dst, operands, |c, b| {
            f16::from_f32(f16::from_bits(c).to_f32() + f16::from_le_bytes(b).to_f32()).to_bits()
        }),
        Dtype::Bf16 => add_as!(AtomicU16, 2, dst, operands, |c, b| {
            bf16::from_f32(bf16::from_bits(c).to_f32() + bf16::from_le_bytes(b).to_f32()).to_bits()
        }),
        // Integers take add_integers; Unspecified is rejected by the checks.
        _ => {}
    }
    // Publish the whole region before the ack that follows.
    fence(Release);
}

/// Atomic fetch-and-add on an int32/int64 cell (wrapping).
///
/// # Safety
/// `p` must be valid and aligned for `dtype`, which is Int32 or Int64; for
/// Int32 the value fits in i32.
pub unsafe fn fetch_add(p: *mut u8, dtype: Dtype, value: i64) -> i64 {
    // SAFETY: the caller's contract.
    unsafe {
        match dtype {
            Dtype::Int32 => AtomicI32::from_ptr(p.cast()).fetch_add(value as i32, AcqRel) as i64,
            _ => AtomicI64::from_ptr(p.cast()).fetch_add(value, AcqRel),
        }
    }
}

/// Atomic compare-and-swap on an int32/int64 cell; returns the previous value.
///
/// # Safety
/// As for [`fetch_add`].
pub unsafe fn compare_swap(p: *mut u8, dtype: Dtype, expected: i64, desired: i64) -> i64 {
    // SAFETY: the caller's contract.
    unsafe {
        match dtype {
            Dtype::Int32 => {
                let cell = AtomicI32::from_ptr(p.cast());
                match cell.compare_exchange(expected as i32, desired as i32, AcqRel, Acquire) {
                    Ok(v) | Err(v) => v as i64,
                }
            }
            _ => {
                let cell = AtomicI64::from_ptr(p.cast());
                match cell.compare_exchange(expected, desired, AcqRel, Acquire) {
                    Ok(v) | Err(v) => v,
                }
            }
        }
    }
}

/// A single-cell atomic on an int32/int64 cell; returns the previous
/// value (sign-extended for int32).
///
/// # Safety
/// As for [`fetch_add`].
pub unsafe fn cell_op(p: *mut u8, dtype: Dtype, op: CellOp) -> i64 {
    // One body for both widths: the value is truncated to the cell's.
    macro_rules! apply {
        ($atomic:ty, $int:ty) => {{
            // SAFETY: the caller's contract.
            let cell = unsafe { <$atomic>::from_ptr(p.cast()) };
            let v = op.value() as $int;
            (match op {
                CellOp::Fetch => cell.load(Acquire),
                CellOp::Swap(_) => cell.swap(v, AcqRel),
                CellOp::Set(_) => {
                    cell.store(v, Release);
                    0
                }
                CellOp::Bitwise(b, _) | CellOp::FetchBitwise(b, _) => match b {
                    BitOp::And => cell.fetch_and(v, AcqRel),
                    BitOp::Or => cell.fetch_or(v, AcqRel),
                    BitOp::Xor => cell.fetch_xor(v, AcqRel),
                    BitOp::Unspecified => cell.load(Acquire),
                },
            }) as i64
        }};
    }
    match dtype {
        Dtype::Int32 => apply!(AtomicI32, i32),
        _ => apply!(AtomicI64, i64),
    }
}

/// Sets or adds to (wrapping) the 8-byte signal cell at `p`, releasing
/// what was written before.
///
/// # Safety
/// `p` must be valid and 8-byte aligned.
pub unsafe fn signal64(p: *mut u8, op: NotifyOp, value: u64) {
    // SAFETY: the caller's contract.
    let cell = unsafe { AtomicU64::from_ptr(p.cast()) };
    match op {
        NotifyOp::AtomicAdd => {
            cell.fetch_add(value, AcqRel);
        }
        _ => cell.store(value, Release),
    }
}

/// The int32 signal cell at `p`.
///
/// # Safety
/// `p` must be valid and 4-byte aligned for the window's lifetime `'a`.
pub(super) unsafe fn signal_cell<'a>(p: *mut u8) -> &'a AtomicI32 {
    // SAFETY: the caller's contract.
    unsafe { AtomicI32::from_ptr(p.cast()) }
}
