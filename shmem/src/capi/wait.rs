//! Point-to-point synchronization: `wait_until` and `test` (with their
//! `_all` / `_any` / `_some` and vector forms) on the PE's own symmetric
//! memory. A wait sleeps until a peer changes one of the PE's windows
//! (pld's change board), so it burns no core; at the sync timeout it fails
//! naming the variable, the comparison and the last value seen.

use crate::fatal::fatal;
use crate::job::pe;
use crate::pe::Pe;
use std::fmt::Display;
use std::sync::atomic::Ordering::Acquire;
use std::time::Duration;

/// `SHMEM_CMP_EQ` .. `SHMEM_CMP_GE`, as shmem.h numbers them.
pub const CMP_EQ: i32 = 0;
/// `SHMEM_CMP_NE`.
pub const CMP_NE: i32 = 1;
const CMP_GT: i32 = 2;
const CMP_LE: i32 = 3;
const CMP_LT: i32 = 4;
const CMP_GE: i32 = 5;

/// How often a wait looks again without a change: a store by another
/// thread of this process changes no window through pld.
const RECHECK: Duration = Duration::from_millis(20);

/// A type `wait_until` and `test` take.
pub trait Watch: Copy + PartialOrd + Display {
    /// Reads the variable atomically.
    ///
    /// # Safety
    /// `p` is valid and aligned for `Self`.
    unsafe fn load(p: *const Self) -> Self;
}

macro_rules! watch {
    ($($t:ty => $atomic:ty;)*) => {$(
        impl Watch for $t {
            unsafe fn load(p: *const Self) -> Self {
                // SAFETY: the caller's contract; the atomic has the type's
                // size and alignment.
                unsafe { <$atomic>::from_ptr(p.cast_mut().cast()).load(Acquire) as $t }
            }
        }
    )*};
}

watch! {
    i16 => std::sync::atomic::AtomicI16;
    u16 => std::sync::atomic::AtomicU16;
    i32 => std::sync::atomic::AtomicI32;
    u32 => std::sync::atomic::AtomicU32;
    i64 => std::sync::atomic::AtomicI64;
    u64 => std::sync::atomic::AtomicU64;
    isize => std::sync::atomic::AtomicIsize;
    usize => std::sync::atomic::AtomicUsize;
}

fn symbol(cmp: i32) -> Option<&'static str> {
    Some(match cmp {
        CMP_EQ => "==",
        CMP_NE => "!=",
        CMP_GT => ">",
        CMP_LE => "<=",
        CMP_LT => "<",
        CMP_GE => ">=",
        _ => return None,
    })
}

/// Whether `v cmp target` holds.
fn holds<T: PartialOrd>(v: T, cmp: i32, target: T) -> bool {
    match cmp {
        CMP_EQ => v == target,
        CMP_NE => v != target,
        CMP_GT => v > target,
        CMP_LE => v <= target,
        CMP_LT => v < target,
        _ => v >= target,
    }
}

fn check_cmp(call: &'static str, cmp: i32) {
    if symbol(cmp).is_none() {
        fatal(format!(
            "{call}: comparison {cmp} is none of SHMEM_CMP_EQ, NE, GT, LE, LT, GE"
        ));
    }
}

/// Where a variable lies, for messages: its space and offset; fatal if
/// it is not symmetric or not aligned to its type.
fn named<T>(p: &Pe, call: &'static str, ivar: *const T) -> String {
    p.locate_cell(call, ivar.cast(), size_of::<T>());
    format!("the variable at {ivar:p} ({})", p.describe(ivar.cast()))
}

/// Waits until `ready()` holds or the sync timeout passes.
pub(crate) fn wait_for(p: &Pe, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + p.sync_timeout();
    if let Some(near) = p.near() {
        if ready() {
            return true;
        }
        // What this PE queued goes out first: it may be what is answered.
        p.block(p.rank().watch(std::time::Duration::ZERO, || true));
        return near.wait(p.rank().rank(), deadline, ready);
    }
    loop {
        if ready() {
            return true;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        if p.block(p.rank().watch(left.min(RECHECK), &mut ready)) {
            return true;
        }
    }
}

/// The fatal report of a wait that timed out.
pub(crate) fn timed_out(p: &Pe, call: &'static str, what: String) -> ! {
    let peers: Vec<u32> = (0..p.rank().nranks())
        .filter(|r| *r != p.rank().rank())
        .collect();
    let unreachable = p.block(p.rank().unreachable(&peers));
    let note = match unreachable.is_empty() {
        true => String::new(),
        false => format!(
            "; PEs that cannot be reached: {}",
            unreachable
                .iter()
                .map(|(r, why)| format!("{r} ({why})"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    fatal(format!(
        "{call}: timed out after {:?} waiting for {what}{note}",
        p.sync_timeout()
    ))
}

/// `wait_until`: blocks until `*ivar cmp value`.
///
/// # Safety
/// `ivar` is a valid, aligned, symmetric `T` of this PE.
pub unsafe fn wait_until<T: Watch>(call: &'static str, ivar: *mut T, cmp: i32, value: T) {
    let p = pe(call);
    check_cmp(call, cmp);
    let name = named(p, call, ivar);
    let mut last = None;
    let ok = wait_for(p, || {
        // SAFETY: the caller's contract.
        let v = unsafe { T::load(ivar) };
        last = Some(v);
        holds(v, cmp, value)
    });
    if !ok {
        let last = last.map_or("none".to_string(), |v| v.to_string());
        let sym = symbol(cmp).unwrap_or("?");
        timed_out(
            p,
            call,
            format!("{name} to be {sym} {value}; last value seen {last}"),
        );
    }
}

/// `test`: whether `*ivar cmp value` holds now.
///
/// # Safety
/// As for [`wait_until`].
pub unsafe fn test<T: Watch>(call: &'static str, ivar: *mut T, cmp: i32, value: T) -> i32 {
    let p = pe(call);
    check_cmp(call, cmp);
    named(p, call, ivar);
    // SAFETY: the caller's contract.
    holds(unsafe { T::load(ivar) }, cmp, value) as i32
}

/// The comparison values of a set: one for all, or one each.
#[derive(Debug, Clone, Copy)]
pub enum Values<T> {
    /// The same value for every variable.
    One(T),
    /// `cmp_values[i]` for variable `i`.
    Each(*mut T),
}

/// What a set wait waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Every included variable.
    All,
    /// One: its index.
    Any,
    /// At least one: all those that hold, into `indices`.
    Some,
}

/// One look at a set: the indices that hold, and whether the set is done.
///
/// # Safety
/// As for [`wait_set`].
unsafe fn scan<T: Watch>(
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    cmp: i32,
    values: Values<T>,
    want: Want,
    taken: &[bool],
) -> (Vec<usize>, bool) {
    let mut hits = Vec::new();
    let mut included = 0;
    for (i, &was_taken) in taken.iter().enumerate().take(nelems) {
        // SAFETY: the caller's contract: `status`, if not null, and the
        // arrays hold `nelems` elements.
        let skip = !status.is_null() && unsafe { *status.add(i) } != 0;
        if skip || (want == Want::Any && was_taken) {
            continue;
        }
        included += 1;
        let target = match values {
            Values::One(v) => v,
            // SAFETY: as above.
            Values::Each(p) => unsafe { *p.add(i) },
        };
        // SAFETY: as above.
        if holds(unsafe { T::load(ivars.add(i)) }, cmp, target) {
            hits.push(i);
        }
    }
    let done = match want {
        Want::All => hits.len() == included,
        Want::Any | Want::Some => !hits.is_empty() || included == 0,
    };
    (hits, done)
}

/// The set waits: `wait_until_all` / `_any` / `_some` (and `_vector`).
/// Returns `_any`'s index (`SIZE_MAX` when nothing is included) or
/// `_some`'s count.
///
/// # Safety
/// `ivars` (and `status` and the vector's values, if not null) hold
/// `nelems` elements; `indices` has room for `nelems`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn wait_set<T: Watch>(
    call: &'static str,
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    indices: *mut usize,
    cmp: i32,
    values: Values<T>,
    want: Want,
) -> usize {
    let p = pe(call);
    check_cmp(call, cmp);
    if nelems > 0 {
        named(p, call, ivars);
    }
    let taken = vec![false; nelems];
    let mut result = (Vec::new(), false);
    let ok = wait_for(p, || {
        // SAFETY: the caller's contract.
        result = unsafe { scan(ivars, nelems, status, cmp, values, want, &taken) };
        result.1
    });
    if !ok {
        let sym = symbol(cmp).unwrap_or("?");
        timed_out(
            p,
            call,
            format!(
                "{want:?} of {nelems} variables at {ivars:p} to be {sym} their value; {} held",
                result.0.len()
            ),
        );
    }
    // SAFETY: as above.
    unsafe { finish(result.0, indices, want) }
}

/// The set tests: `test_all` (1 or 0), `test_any` (index or `SIZE_MAX`),
/// `test_some` (count).
///
/// # Safety
/// As for [`wait_set`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn test_set<T: Watch>(
    call: &'static str,
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    indices: *mut usize,
    cmp: i32,
    values: Values<T>,
    want: Want,
) -> usize {
    let p = pe(call);
    check_cmp(call, cmp);
    if nelems > 0 {
        named(p, call, ivars);
    }
    let taken = vec![false; nelems];
    // SAFETY: the caller's contract.
    let (hits, done) = unsafe { scan(ivars, nelems, status, cmp, values, want, &taken) };
    match want {
        Want::All => done as usize,
        Want::Any if hits.is_empty() => usize::MAX,
        // SAFETY: as above.
        _ => unsafe { finish(hits, indices, want) },
    }
}

/// The result of a set op that is done.
///
/// # Safety
/// `indices` has room for `hits.len()` when `want` is `Some`.
unsafe fn finish(hits: Vec<usize>, indices: *mut usize, want: Want) -> usize {
    match want {
        Want::All => 0,
        Want::Any => hits.first().copied().unwrap_or(usize::MAX),
        Want::Some => {
            for (k, i) in hits.iter().enumerate() {
                // SAFETY: the caller's contract.
                unsafe { *indices.add(k) = *i };
            }
            hits.len()
        }
    }
}
