//! The reductions' element operations, for the 1.5 team forms
//! (`shmem_int_sum_reduce`) and the 1.4 active-set forms
//! (`shmem_int_sum_to_all`); the data movement is [`super::coll::reduce`].
//! Integers wrap, as C's unsigned arithmetic does.

use super::coll::{Scope, reduce};
use pld_proto::collective::Plain;
use std::ffi::c_void;

/// A reduction operator.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and.
    And,
    /// Bitwise or.
    Or,
    /// Bitwise xor.
    Xor,
}

/// An element type the reductions take.
pub(crate) trait Reducible: Plain + PartialOrd {
    /// `op` of `a` and `b`.
    fn combine(op: Op, a: Self, b: Self) -> Self;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Reducible for $t {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    Op::Sum => a.wrapping_add(b),
                    Op::Prod => a.wrapping_mul(b),
                    Op::Min => a.min(b),
                    Op::Max => a.max(b),
                    Op::And => a & b,
                    Op::Or => a | b,
                    Op::Xor => a ^ b,
                }
            }
        }
    )*};
}
int!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

macro_rules! float {
    ($($t:ty),*) => {$(
        impl Reducible for $t {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    Op::Sum => a + b,
                    Op::Prod => a * b,
                    Op::Min => if b < a { b } else { a },
                    Op::Max => if b > a { b } else { a },
                    // shmem.h declares no bitwise reduction of a float.
                    Op::And | Op::Or | Op::Xor => a,
                }
            }
        }
    )*};
}
float!(f32, f64);

/// A reduction over a team (`team` handle) or an active set.
///
/// # Safety
/// `source` and `dest` (symmetric) hold `nreduce` elements.
pub(crate) unsafe fn typed<T: Reducible>(
    call: &'static str,
    scope: Scope,
    dest: *mut T,
    source: *const T,
    nreduce: usize,
    op: Op,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        reduce(call, scope, dest, source, nreduce, |a, b| {
            T::combine(op, a, b)
        })
    }
}

/// The 1.4 active-set form's `nreduce`, which is an `int`.
pub(crate) fn count(call: &'static str, nreduce: i32) -> usize {
    usize::try_from(nreduce)
        .unwrap_or_else(|_| crate::pe::fatal(format!("{call}: nreduce {nreduce} is negative")))
}

/// How the header's inline reductions of the types Rust has no
/// arithmetic for (`long double`, the complex types) combine two
/// elements: `*acc = *acc op *x`, in C.
pub(crate) type Combine = unsafe extern "C" fn(acc: *mut c_void, x: *const c_void);

/// A reduction of `size`-byte elements with a C combiner.
///
/// # Safety
/// `source` and `dest` hold `nreduce` elements of `size` bytes; `combine`
/// combines two of them.
unsafe fn by_c<const N: usize>(
    call: &'static str,
    scope: Scope,
    dest: *mut c_void,
    source: *const c_void,
    nreduce: usize,
    combine: Combine,
) -> i32 {
    let f = move |a: [u8; N], b: [u8; N]| {
        // The C element, aligned for any type the header passes.
        #[repr(C, align(16))]
        struct Slot<const M: usize>([u8; M]);
        let mut acc = Slot(a);
        let x = Slot(b);
        // SAFETY: both point at one element of the type `combine` takes.
        unsafe {
            combine(
                (&mut acc.0 as *mut [u8; N]).cast(),
                (&x.0 as *const [u8; N]).cast(),
            )
        };
        acc.0
    };
    // SAFETY: the caller's contract.
    unsafe {
        reduce(
            call,
            scope,
            dest.cast::<[u8; N]>(),
            source.cast(),
            nreduce,
            f,
        )
    }
}

/// `pld_shmem_reduce`: the entry point of the header's inline reductions
/// (`long double`, `float _Complex`, `double _Complex`). `team` is a team
/// handle, or null with an active set in `pe_start` .. `psync`; `call`
/// the call's name, a string literal.
///
/// # Safety
/// As for the typed reductions, with `size` bytes per element.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pld_shmem_reduce(
    call: *const std::ffi::c_char,
    team: usize,
    dest: *mut c_void,
    source: *const c_void,
    nreduce: usize,
    size: usize,
    combine: Combine,
    pe_start: i32,
    log_pe_stride: i32,
    pe_size: i32,
    psync: *mut i64,
) -> i32 {
    // SAFETY: the header passes its call's name as a string literal,
    // which lives as long as the program.
    let call: &'static str = unsafe { &*(std::ffi::CStr::from_ptr(call) as *const std::ffi::CStr) }
        .to_str()
        .unwrap_or("shmem reduction");
    let scope = match team {
        0 if !psync.is_null() => Scope::Active((pe_start, log_pe_stride, pe_size), psync),
        t => Scope::Team(t),
    };
    // SAFETY: the caller's contract.
    unsafe {
        match size {
            8 => by_c::<8>(call, scope, dest, source, nreduce, combine),
            16 => by_c::<16>(call, scope, dest, source, nreduce, combine),
            _ => crate::pe::fatal(format!("{call}: no reduction of {size}-byte elements")),
        }
    }
}
