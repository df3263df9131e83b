//! The atomics: each is one pld op, atomic at the target — fetch_add and
//! compare_swap, atomic add (queued like a put, complete at quiet), and
//! the cell ops (swap, fetch, set, and / or / xor). Values travel as the
//! bits of an int32 or int64 cell; unsigned and floating-point types are
//! their bit patterns.

use crate::job::pe;
use crate::near::Amo as Near;
use crate::pe::Deferred;
use pld_proto::{BitOp, CellOp, Dtype};

/// A type OpenSHMEM's atomics take.
pub trait Amo: Copy {
    /// The cell: int32 or int64, by width.
    const DTYPE: Dtype;
    /// One (for inc).
    const ONE: Self;
    /// The cell's bits, sign-extended.
    fn bits(self) -> i64;
    /// The value of the cell's bits.
    fn from_bits(v: i64) -> Self;
}

macro_rules! amo_int {
    ($($t:ty => $cell:ty, $dtype:ident;)*) => {$(
        impl Amo for $t {
            const DTYPE: Dtype = Dtype::$dtype;
            const ONE: Self = 1;
            fn bits(self) -> i64 {
                self as $cell as i64
            }
            fn from_bits(v: i64) -> Self {
                v as $cell as $t
            }
        }
    )*};
}

amo_int! {
    i32 => i32, Int32;
    u32 => i32, Int32;
    i64 => i64, Int64;
    u64 => i64, Int64;
    isize => i64, Int64;
    usize => i64, Int64;
}

impl Amo for f32 {
    const DTYPE: Dtype = Dtype::Int32;
    const ONE: Self = 1.0;
    fn bits(self) -> i64 {
        self.to_bits() as i32 as i64
    }
    fn from_bits(v: i64) -> Self {
        f32::from_bits(v as u32)
    }
}

impl Amo for f64 {
    const DTYPE: Dtype = Dtype::Int64;
    const ONE: Self = 1.0;
    fn bits(self) -> i64 {
        self.to_bits() as i64
    }
    fn from_bits(v: i64) -> Self {
        f64::from_bits(v as u64)
    }
}

/// A cell op of the typed API.
#[derive(Debug, Clone, Copy)]
pub enum Cell<T> {
    /// Read the cell.
    Fetch,
    /// Write the cell.
    Set(T),
    /// Replace the cell, returning what it held.
    Swap(T),
    /// And / or / xor into the cell.
    Bit(BitOp, T),
}

impl<T: Amo> Cell<T> {
    /// The pld op: `wants` says whether the program takes the old value.
    fn op(self, wants: bool) -> CellOp {
        match self {
            Cell::Fetch => CellOp::Fetch,
            Cell::Set(v) => CellOp::Set(v.bits()),
            Cell::Swap(v) => CellOp::Swap(v.bits()),
            Cell::Bit(b, v) if wants => CellOp::FetchBitwise(b, v.bits()),
            Cell::Bit(b, v) => CellOp::Bitwise(b, v.bits()),
        }
    }
}

/// The rank, window and offset of the cell at `dest` on `pe`.
fn cell_at<T>(
    call: &'static str,
    dest: *const T,
    pe_: i32,
) -> (&'static crate::pe::Pe, u32, pld_server::WindowId, u64) {
    let p = pe(call);
    let peer = super::ctx::peer(p, call, pe_);
    let (win, off) = p.locate_cell(call, dest.cast(), size_of::<T>());
    (p, peer, win, off)
}

/// `amo` through the heap the PEs of this host share, if the cell is in
/// it: the old value.
fn near<T: Amo>(
    p: &crate::pe::Pe,
    peer: u32,
    win: pld_server::WindowId,
    off: u64,
    amo: Near,
) -> Option<T> {
    let old = p.near()?.amo(peer, win, off, T::DTYPE, amo)?;
    Some(T::from_bits(old))
}

/// Writes a fetching `_nbi` atomic's old value where the program asked
/// (`null_fetch` refused a null one).
fn land<T>(fetch: *mut T, v: T) {
    // SAFETY: the `_nbi` call's contract: `fetch` is valid for a `T`.
    unsafe { fetch.write_unaligned(v) };
}

/// `fetch_add` (and `fetch_inc`).
///
/// # Safety
/// `dest` is the symmetric address of a `T`.
pub unsafe fn fetch_add<T: Amo>(call: &'static str, dest: *mut T, value: T, pe_: i32) -> T {
    let (p, peer, win, off) = cell_at(call, dest, pe_);
    if let Some(old) = near(p, peer, win, off, Near::FetchAdd(value.bits())) {
        return old;
    }
    T::from_bits(p.run(
        call,
        p.rank().fetch_add(peer, win, off, T::DTYPE, value.bits()),
    ))
}

/// `add` (and `inc`): complete at the next quiet.
///
/// # Safety
/// As for [`fetch_add`].
pub unsafe fn add<T: Amo>(call: &'static str, dest: *mut T, value: T, pe_: i32) {
    let (p, peer, win, off) = cell_at(call, dest, pe_);
    if near::<T>(p, peer, win, off, Near::FetchAdd(value.bits())).is_some() {
        return;
    }
    let bits = value.bits().to_le_bytes();
    let operand = &bits[..size_of::<T>()];
    if super::ctx::tracking() {
        let r = p.rank().atomic_add_nb(peer, win, off, T::DTYPE, operand);
        let handle = p.run(call, r);
        super::ctx::issued(call, handle);
    } else {
        p.run(
            call,
            p.rank().atomic_add_nbi(peer, win, off, T::DTYPE, operand),
        );
    }
}

/// `compare_swap`.
///
/// # Safety
/// As for [`fetch_add`].
pub unsafe fn compare_swap<T: Amo>(
    call: &'static str,
    dest: *mut T,
    cond: T,
    value: T,
    pe_: i32,
) -> T {
    let (p, peer, win, off) = cell_at(call, dest, pe_);
    let amo = Near::CompareSwap {
        expected: cond.bits(),
        desired: value.bits(),
    };
    if let Some(old) = near(p, peer, win, off, amo) {
        return old;
    }
    let r = p
        .rank()
        .compare_swap(peer, win, off, T::DTYPE, cond.bits(), value.bits());
    T::from_bits(p.run(call, r))
}

/// `compare_swap_nbi`: the old value lands in `*fetch` by the next quiet.
///
/// # Safety
/// As for [`fetch_add`]; `fetch` is valid for a `T` until then.
pub unsafe fn compare_swap_nbi<T: Amo>(
    call: &'static str,
    fetch: *mut T,
    dest: *mut T,
    cond: T,
    value: T,
    pe_: i32,
) {
    null_fetch(call, fetch);
    let (p, peer, win, off) = cell_at(call, dest, pe_);
    let amo = Near::CompareSwap {
        expected: cond.bits(),
        desired: value.bits(),
    };
    if let Some(old) = near(p, peer, win, off, amo) {
        return land(fetch, old);
    }
    let r = p
        .rank()
        .compare_swap_nb(peer, win, off, T::DTYPE, cond.bits(), value.bits());
    let handle = p.run(call, r);
    defer_value::<T>(p, handle, fetch);
}

/// `fetch_add_nbi` (and `fetch_inc_nbi`).
///
/// # Safety
/// As for [`compare_swap_nbi`].
pub unsafe fn fetch_add_nbi<T: Amo>(
    call: &'static str,
    fetch: *mut T,
    dest: *mut T,
    value: T,
    pe_: i32,
) {
    null_fetch(call, fetch);
    let (p, peer, win, off) = cell_at(call, dest, pe_);
    if let Some(old) = near(p, peer, win, off, Near::FetchAdd(value.bits())) {
        return land(fetch, old);
    }
    let handle = p.run(
        call,
        p.rank()
            .fetch_add_nb(peer, win, off, T::DTYPE, value.bits()),
    );
    defer_value::<T>(p, handle, fetch);
}

/// A cell op whose old value the program takes now.
///
/// # Safety
/// As for [`fetch_add`].
pub unsafe fn cell<T: Amo>(call: &'static str, dest: *mut T, op: Cell<T>, pe_: i32) -> T {
    let (p, peer, win, off) = cell_at(call, dest, pe_);
    if let Some(old) = near(p, peer, win, off, Near::Cell(op.op(true))) {
        return old;
    }
    let handle = p.run(
        call,
        p.rank().cell_op_nb(peer, win, off, T::DTYPE, op.op(true)),
    );
    T::from_bits(p.run(call, handle.wait()))
}

/// A cell op that completes by the next quiet (set, and, or, xor).
///
/// # Safety
/// As for [`fetch_add`].
pub unsafe fn cell_nbi<T: Amo>(call: &'static str, dest: *mut T, op: Cell<T>, pe_: i32) {
    let (p, peer, win, off) = cell_at(call, dest, pe_);
    if near::<T>(p, peer, win, off, Near::Cell(op.op(false))).is_some() {
        return;
    }
    let handle = p.run(
        call,
        p.rank().cell_op_nb(peer, win, off, T::DTYPE, op.op(false)),
    );
    super::ctx::issued(call, handle);
}

/// A fetching cell op whose old value lands in `*fetch` by the next
/// quiet; a null `fetch` is refused, never a value silently dropped.
///
/// # Safety
/// As for [`compare_swap_nbi`].
pub unsafe fn cell_fetch_nbi<T: Amo>(
    call: &'static str,
    fetch: *mut T,
    dest: *mut T,
    op: Cell<T>,
    pe_: i32,
) {
    null_fetch(call, fetch);
    let (p, peer, win, off) = cell_at(call, dest, pe_);
    if let Some(old) = near::<T>(p, peer, win, off, Near::Cell(op.op(true))) {
        return land(fetch, old);
    }
    let handle = p.run(
        call,
        p.rank().cell_op_nb(peer, win, off, T::DTYPE, op.op(true)),
    );
    defer_value::<T>(p, handle, fetch);
}

/// Refuses a fetching `_nbi` call's null `fetch`, before anything moves.
fn null_fetch<T>(call: &'static str, fetch: *mut T) {
    if fetch.is_null() {
        crate::fatal::fatal(format!(
            "{call}: fetch is a null pointer (a fetching _nbi atomic leaves its old value there)"
        ));
    }
}

fn defer_value<T>(p: &crate::pe::Pe, handle: pld_server::OpHandle<i64>, fetch: *mut T) {
    super::ctx::defer(
        p,
        Deferred::Value {
            handle,
            to: fetch as usize,
            width: size_of::<T>(),
        },
    );
}
