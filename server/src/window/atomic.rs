//! Per-element atomic kernels on window memory.
//!
//! Integers use the hardware's atomic add; floating point uses a
//! compare-and-swap loop on the element's bits. fp16 and bf16 add in fp32 and
//! round back to nearest even: fp32 carries more than 2p+2 bits for both
//! (p = 11 and 8), so the double rounding gives the correctly rounded sum.

use half::{bf16, f16};
use pld_proto::Dtype;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{
    AtomicI8, AtomicI16, AtomicI32, AtomicI64, AtomicU16, AtomicU32, AtomicU64, fence,
};

/// Applies `f` to each `N`-byte element of `operands` and the matching cell.
///
/// # Safety
/// `dst` must be valid for `operands.len()` bytes and aligned to `N`.
unsafe fn each<const N: usize>(dst: *mut u8, operands: &[u8], f: impl Fn(*mut u8, [u8; N])) {
    for (i, chunk) in operands.chunks_exact(N).enumerate() {
        let bytes: [u8; N] = std::array::from_fn(|k| chunk[k]);
        // SAFETY: i * N + N <= operands.len(), inside `dst`'s range.
        f(unsafe { dst.add(i * N) }, bytes);
    }
}

/// Elementwise atomic `dst += operands` for `dtype`.
///
/// # Safety
/// `dst` must be valid for `operands.len()` bytes and aligned to
/// `dtype.size()`; `operands.len()` must be a multiple of it.
pub(super) unsafe fn add(dst: *mut u8, dtype: Dtype, operands: &[u8]) {
    // SAFETY: `each` hands every closure below element pointers inside the
    // caller's valid, aligned range, as `from_ptr` requires.
    unsafe {
        match dtype {
            Dtype::Int8 => each::<1>(dst, operands, |p, b| {
                AtomicI8::from_ptr(p.cast()).fetch_add(i8::from_le_bytes(b), Relaxed);
            }),
            Dtype::Int16 => each::<2>(dst, operands, |p, b| {
                AtomicI16::from_ptr(p.cast()).fetch_add(i16::from_le_bytes(b), Relaxed);
            }),
            Dtype::Int32 => each::<4>(dst, operands, |p, b| {
                AtomicI32::from_ptr(p.cast()).fetch_add(i32::from_le_bytes(b), Relaxed);
            }),
            Dtype::Int64 => each::<8>(dst, operands, |p, b| {
                AtomicI64::from_ptr(p.cast()).fetch_add(i64::from_le_bytes(b), Relaxed);
            }),
            Dtype::Fp32 => each::<4>(dst, operands, |p, b| {
                let v = f32::from_le_bytes(b);
                update(AtomicU32::from_ptr(p.cast()), |c| {
                    (f32::from_bits(c) + v).to_bits()
                });
            }),
            Dtype::Fp64 => each::<8>(dst, operands, |p, b| {
                let v = f64::from_le_bytes(b);
                update64(AtomicU64::from_ptr(p.cast()), |c| {
                    (f64::from_bits(c) + v).to_bits()
                });
            }),
            Dtype::Fp16 => each::<2>(dst, operands, |p, b| {
                let v = f16::from_le_bytes(b).to_f32();
                update16(AtomicU16::from_ptr(p.cast()), |c| {
                    f16::from_f32(f16::from_bits(c).to_f32() + v).to_bits()
                });
            }),
            Dtype::Bf16 => each::<2>(dst, operands, |p, b| {
                let v = bf16::from_le_bytes(b).to_f32();
                update16(AtomicU16::from_ptr(p.cast()), |c| {
                    bf16::from_f32(bf16::from_bits(c).to_f32() + v).to_bits()
                });
            }),
            // Rejected by the checks; nothing to add.
            Dtype::Unspecified => {}
        }
    }
    // Publish the whole region before the ack that follows.
    fence(Release);
}

fn update(cell: &AtomicU32, f: impl Fn(u32) -> u32) {
    let _ = cell.fetch_update(Relaxed, Relaxed, |c| Some(f(c)));
}

fn update64(cell: &AtomicU64, f: impl Fn(u64) -> u64) {
    let _ = cell.fetch_update(Relaxed, Relaxed, |c| Some(f(c)));
}

fn update16(cell: &AtomicU16, f: impl Fn(u16) -> u16) {
    let _ = cell.fetch_update(Relaxed, Relaxed, |c| Some(f(c)));
}

/// Atomic fetch-and-add on an int32/int64 cell (wrapping).
///
/// # Safety
/// `p` must be valid and aligned for `dtype`, which is Int32 or Int64; for
/// Int32 the value fits in i32.
pub(super) unsafe fn fetch_add(p: *mut u8, dtype: Dtype, value: i64) -> i64 {
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
pub(super) unsafe fn compare_swap(p: *mut u8, dtype: Dtype, expected: i64, desired: i64) -> i64 {
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

/// The int32 signal cell at `p`.
///
/// # Safety
/// `p` must be valid and 4-byte aligned for the window's lifetime `'a`.
pub(super) unsafe fn signal_cell<'a>(p: *mut u8) -> &'a AtomicI32 {
    // SAFETY: the caller's contract.
    unsafe { AtomicI32::from_ptr(p.cast()) }
}
