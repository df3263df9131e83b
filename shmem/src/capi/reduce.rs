//! The 1.3 active-set reductions (`shmem_double_sum_to_all`, ...), which the
//! OSU benchmarks use to summarise their results. Each member reads every
//! member's `source` (one get each), reduces locally, and writes `dest`
//! only after all have read: `dest` may alias `source`.

use super::sync::{active_barrier, members};
use crate::pe::pe;

/// The reduction.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// Sum.
    Sum,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

/// `shmem_T_OP_to_all` over the active set `set`.
///
/// # Safety
/// `source` and `dest` are symmetric and hold `nreduce` elements.
pub unsafe fn to_all<T>(
    call: &'static str,
    dest: *mut T,
    source: *const T,
    nreduce: i32,
    op: Op,
    set: (i32, i32, i32),
) where
    T: Copy + PartialOrd + std::ops::Add<Output = T>,
{
    let p = pe(call);
    let all = members(call, p, set);
    let n = usize::try_from(nreduce)
        .unwrap_or_else(|_| crate::pe::fatal(format!("{call}: nreduce {nreduce} is negative")));
    let bytes = n * size_of::<T>();
    let (win, off) = p.locate(call, source.cast(), bytes as u64);
    active_barrier(call, p, set);
    let mut acc: Option<Vec<T>> = None;
    for &m in &all {
        let b = p.run(call, p.rank().get(m, win, off, bytes as u64));
        // SAFETY: `b` holds `n` elements of `T` (plain data, any bits).
        let vals: Vec<T> = (0..n)
            .map(|i| unsafe { b.as_ptr().cast::<T>().add(i).read_unaligned() })
            .collect();
        acc = Some(match acc {
            None => vals,
            Some(a) => a
                .into_iter()
                .zip(vals)
                .map(|(x, y)| match op {
                    Op::Sum => x + y,
                    Op::Max => {
                        if y > x {
                            y
                        } else {
                            x
                        }
                    }
                    Op::Min => {
                        if y < x {
                            y
                        } else {
                            x
                        }
                    }
                })
                .collect(),
        });
    }
    active_barrier(call, p, set);
    if let Some(a) = acc {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(a.as_ptr(), dest, n) };
    }
}
