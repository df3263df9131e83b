//! The reductions' entry points, for the 1.5 team forms
//! (`shmem_int_sum_reduce`) and the 1.4 active-set forms
//! (`shmem_int_sum_to_all`), generated from the header, and the header's
//! inline reductions of the types Rust has no arithmetic for. The
//! operators are `coll::fold`'s; the data movement is `coll::reduce`.

use crate::coll::{ByC, ByOp, Combine, Op, Reducible, Scope, reduce};
use std::ffi::c_void;

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
    unsafe { reduce(call, scope, dest, source, nreduce, &ByOp(op)) }
}

/// The 1.4 active-set form's `nreduce`, which is an `int`.
pub(crate) fn count(call: &'static str, nreduce: i32) -> usize {
    usize::try_from(nreduce)
        .unwrap_or_else(|_| crate::fatal::fatal(format!("{call}: nreduce {nreduce} is negative")))
}

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
    // SAFETY: the caller's contract.
    unsafe {
        reduce(
            call,
            scope,
            dest.cast::<[u8; N]>(),
            source.cast(),
            nreduce,
            &ByC(combine),
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
            _ => crate::fatal::fatal(format!("{call}: no reduction of {size}-byte elements")),
        }
    }
}
