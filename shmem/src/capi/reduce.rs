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

/// How a reduction combines its elements: one pair at a time (the
/// network path, element by element) and a whole part into an
/// accumulator (the shared-memory path). The data movement takes it as a
/// trait object, so it is compiled once per element type, not once per
/// operator.
pub(crate) trait Fold<T: Plain>: Sync {
    /// `a op b`.
    fn element(&self, a: T, b: T) -> T;

    /// `acc[k] = acc[k] op part[k]` for every `k`.
    ///
    /// # Safety
    /// `part` is `acc.len()` readable elements, at any alignment, that
    /// nobody changes meanwhile.
    unsafe fn fold(&self, acc: &mut [T], part: *const u8) {
        // SAFETY: the caller's contract.
        unsafe { each(acc, part, |a, b| self.element(a, b)) }
    }
}

/// `acc[k] = f(acc[k], part[k])` for every `k`: inlined into a loop per
/// operator, which the compiler vectorises (a `match` on the operator
/// per element does not).
///
/// # Safety
/// As for [`Fold::fold`].
#[inline(always)]
unsafe fn each<T: Plain>(acc: &mut [T], part: *const u8, f: impl Fn(T, T) -> T) {
    for (k, a) in acc.iter_mut().enumerate() {
        // SAFETY: `k` < `acc.len()`, which `part` holds; every Plain
        // type is a number or bytes, valid at any bit pattern.
        let b = unsafe { part.cast::<T>().add(k).read_unaligned() };
        *a = f(*a, b);
    }
}

/// A typed reduction's operator.
struct ByOp(Op);

impl<T: Reducible> Fold<T> for ByOp {
    fn element(&self, a: T, b: T) -> T {
        T::combine(self.0, a, b)
    }

    unsafe fn fold(&self, acc: &mut [T], part: *const u8) {
        macro_rules! per_op {
            ($($op:ident),*) => {
                match self.0 {
                    // SAFETY: the caller's contract.
                    $(Op::$op => unsafe { each(acc, part, |a, b| T::combine(Op::$op, a, b)) },)*
                }
            };
        }
        per_op!(Sum, Prod, Min, Max, And, Or, Xor)
    }
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Reducible for $t {
            #[inline(always)]
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
            #[inline(always)]
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
    unsafe { reduce(call, scope, dest, source, nreduce, &ByOp(op)) }
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

/// A C combiner of `N`-byte elements.
struct ByC(Combine);

impl<const N: usize> Fold<[u8; N]> for ByC {
    fn element(&self, a: [u8; N], b: [u8; N]) -> [u8; N] {
        // The C element, aligned for any type the header passes.
        #[repr(C, align(16))]
        struct Slot<const M: usize>([u8; M]);
        let mut acc = Slot(a);
        let x = Slot(b);
        // SAFETY: both point at one element of the type `combine` takes.
        unsafe {
            (self.0)(
                (&mut acc.0 as *mut [u8; N]).cast(),
                (&x.0 as *const [u8; N]).cast(),
            )
        };
        acc.0
    }
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
            _ => crate::pe::fatal(format!("{call}: no reduction of {size}-byte elements")),
        }
    }
}
