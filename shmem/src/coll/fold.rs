//! The reductions' operators: how a reduction combines two elements, and
//! a whole part into an accumulator. Integers wrap, as C's unsigned
//! arithmetic does.

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
pub(crate) struct ByOp(pub(crate) Op);

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

/// How the header's inline reductions of the types Rust has no
/// arithmetic for (`long double`, the complex types) combine two
/// elements: `*acc = *acc op *x`, in C.
pub(crate) type Combine = unsafe extern "C" fn(acc: *mut c_void, x: *const c_void);

/// A C combiner of `N`-byte elements.
pub(crate) struct ByC(pub(crate) Combine);

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
