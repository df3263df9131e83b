//! Distributed locks: `shmem_set_lock`, `shmem_test_lock`,
//! `shmem_clear_lock` — an MCS queue on pld's 32-bit atomics, so waiters
//! are served in the order they arrived and each spins (sleeps, with
//! pld's change board) on its own memory only.
//!
//! The lock's `long` is two 32-bit cells on every PE: the first, on PE 0
//! only, is the queue's tail (the last PE in it, plus one; 0 when free);
//! the second is each PE's queue node: the PE after it (plus one), which
//! that PE writes when it joins behind, and [`GRANTED`], which the PE
//! before it sets when it hands the lock on.

use crate::fatal::fatal;
use crate::job::pe;
use crate::near::Amo;
use crate::pe::Pe;
use pld_proto::{BitOp, CellOp, Dtype};
use pld_server::WindowId;
use std::sync::atomic::{AtomicI32, Ordering};

/// The node bit the PE ahead sets to hand the lock on.
const GRANTED: i32 = i32::MIN;
/// The PE whose cell is the queue's tail.
const HOME: u32 = 0;

/// A lock, located.
struct Lock {
    window: WindowId,
    /// The offset of the tail cell; the node cell is 4 bytes after.
    offset: u64,
    /// This PE's node cell.
    node: *mut i32,
    /// This PE's number, plus one: what the queue holds.
    me: i32,
}

impl Lock {
    fn at(p: &Pe, call: &'static str, lock: *mut i64) -> Lock {
        if (lock as usize) % 8 != 0 {
            fatal(format!(
                "{call}: the lock at {lock:p} is not 8-byte aligned"
            ));
        }
        let (window, offset) = p.locate_cell(call, lock.cast(), 8);
        Lock {
            window,
            offset,
            node: lock.cast::<i32>().wrapping_add(1),
            me: p.rank().rank() as i32 + 1,
        }
    }

    fn node(&self) -> &AtomicI32 {
        // SAFETY: `node` is the aligned second half of a symmetric long of
        // this PE, which lives as long as the process.
        unsafe { AtomicI32::from_ptr(self.node) }
    }

    fn tail_op(&self, p: &Pe, call: &'static str, op: CellOp) -> i32 {
        if let Some(old) = self.near(p, HOME, 0, Amo::Cell(op)) {
            return old;
        }
        p.run(
            call,
            p.rank()
                .cell_op(HOME, self.window, self.offset, Dtype::Int32, op),
        ) as i32
    }

    fn tail_cas(&self, p: &Pe, call: &'static str, expected: i32, desired: i32) -> i32 {
        let amo = Amo::CompareSwap {
            expected: expected as i64,
            desired: desired as i64,
        };
        if let Some(old) = self.near(p, HOME, 0, amo) {
            return old;
        }
        let r = p.rank();
        p.run(
            call,
            r.compare_swap(
                HOME,
                self.window,
                self.offset,
                Dtype::Int32,
                expected as i64,
                desired as i64,
            ),
        ) as i32
    }

    /// Sets bits of PE `who - 1`'s node.
    fn tell(&self, p: &Pe, call: &'static str, who: i32, bits: i32) {
        let r = p.rank();
        let op = CellOp::Bitwise(BitOp::Or, bits as i64);
        let peer = (who - 1) as u32;
        if self.near(p, peer, 4, Amo::Cell(op)).is_some() {
            return;
        }
        p.run(
            call,
            r.cell_op(peer, self.window, self.offset + 4, Dtype::Int32, op),
        );
    }

    /// `amo` on the int32 at `self.offset + at` on `peer` through shared
    /// memory, if the lock is in the shared heap.
    fn near(&self, p: &Pe, peer: u32, at: u64, amo: Amo) -> Option<i32> {
        let n = p.near()?;
        let old = n.amo(peer, self.window, self.offset + at, Dtype::Int32, amo)?;
        Some(old as i32)
    }

    /// Waits until this PE's node satisfies `ready`.
    fn wait(
        &self,
        p: &Pe,
        call: &'static str,
        lock: *mut i64,
        what: &str,
        ready: impl Fn(i32) -> bool,
    ) {
        let node = self.node();
        if !super::wait::wait_for(p, || ready(node.load(Ordering::Acquire))) {
            super::wait::timed_out(
                p,
                call,
                format!(
                    "{what} of the lock at {lock:p} ({})",
                    p.describe(lock.cast())
                ),
            );
        }
    }
}

/// `shmem_set_lock`: joins the lock's queue and waits to be handed it.
///
/// # Safety
/// `lock` is a symmetric `long`, zero before its first use, used only by
/// these calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_set_lock(lock: *mut i64) {
    let call = "shmem_set_lock";
    let p = pe(call);
    let l = Lock::at(p, call, lock);
    l.node().store(0, Ordering::Release);
    let ahead = l.tail_op(p, call, CellOp::Swap(l.me as i64));
    if ahead == 0 {
        return;
    }
    l.tell(p, call, ahead, l.me);
    let what = format!("PE {} to hand on its hold", ahead - 1);
    l.wait(p, call, lock, &what, |n| n & GRANTED != 0);
}

/// `shmem_test_lock`: takes the lock if it is free (0); 1 if it is not.
///
/// # Safety
/// As for [`shmem_set_lock`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_test_lock(lock: *mut i64) -> i32 {
    let call = "shmem_test_lock";
    let p = pe(call);
    let l = Lock::at(p, call, lock);
    l.node().store(0, Ordering::Release);
    match l.tail_cas(p, call, 0, l.me) {
        0 => 0,
        _ => 1,
    }
}

/// `shmem_clear_lock`: completes this PE's puts (a quiet), then hands the
/// lock to the PE queued next, or frees it.
///
/// # Safety
/// As for [`shmem_set_lock`]; this PE holds the lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shmem_clear_lock(lock: *mut i64) {
    let call = "shmem_clear_lock";
    let p = pe(call);
    let l = Lock::at(p, call, lock);
    p.quiet(call);
    let mut next = l.node().load(Ordering::Acquire) & !GRANTED;
    if next == 0 {
        if l.tail_cas(p, call, l.me, 0) == l.me {
            return;
        }
        // A PE joined behind this one and is about to say so.
        l.wait(
            p,
            call,
            lock,
            "the PE queued behind this one to name itself",
            |n| n & !GRANTED != 0,
        );
        next = l.node().load(Ordering::Acquire) & !GRANTED;
    }
    l.tell(p, call, next, GRANTED);
}
