//! One-way signals between the members of a team or an active set, for
//! the collectives and barriers that run in one round through shared
//! memory: member
//! `s` tells member `r` "my part of this call is done" by adding 1 to the
//! cell `r` keeps for `s`; `r` takes it by subtracting 1.
//!
//! A cell per sender, not one counter: signals from one sender arrive in
//! the order it sent them, and a member takes them in the order it calls
//! the collectives — the same order on every member — so each signal is
//! the one the taker expects even when a fast member is already a call
//! ahead. Every signal a call sends to a member is taken by that member
//! before it returns, so between calls the cells hold their base value
//! (a `pSync` array is `SHMEM_SYNC_VALUE` again, as the specification
//! requires of it).
//!
//! A team's flag cells follow its barrier's in its slot; an active set's
//! are the first cells of its `pSync`, which no barrier uses during the
//! call (the program may not reuse a `pSync` a call still uses).

use super::sync::{COUNT_CELL, Cells, SYNC_CELLS};
use crate::near::{Amo, Near};
use pld_proto::Dtype;
use pld_proto::barrier::join;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// A team's flag cells: after its barrier's, to the end of its cell bytes.
pub(crate) fn team_flags(cell_bytes: u64) -> (u64, u64) {
    (SYNC_CELLS, cell_bytes / 8 - SYNC_CELLS)
}

/// An active set's flag cells: the `pSync` array's, up to its count cell
/// (`collect` keeps its count there during the call).
pub(crate) const ACTIVE_FLAGS: (u64, u64) = (0, COUNT_CELL);

/// The flags of a group of `n` members, this PE being member `me`.
pub(crate) struct Flags<'a> {
    near: &'a Near,
    cells: Cells,
    /// The global PE of each member.
    members: &'a [u32],
    me: u32,
}

/// Some members did not signal in time.
#[derive(Debug, thiserror::Error)]
#[error(
    "timed out after {timeout:?} waiting for PE {waiting_for}'s signal; not heard from PEs {not_heard_from}"
)]
pub(crate) struct Unheard {
    pub timeout: Duration,
    pub waiting_for: u32,
    pub not_heard_from: String,
}

impl<'a> Flags<'a> {
    /// The flags of `members` over `cells`, if the group fits its cells
    /// and they lie in the shared heap (an active set's `pSync` may be a
    /// static array, which only the network reaches).
    pub(crate) fn new(near: &'a Near, cells: Cells, members: &'a [u32], me: u32) -> Option<Self> {
        let first = cells.offset + cells.flags * 8;
        let shared = members
            .get(me as usize)
            .and_then(|pe| near.at(*pe, cells.window, first, cells.flag_cells * 8))
            .is_some();
        (shared && members.len() as u64 <= cells.flag_cells).then_some(Flags {
            near,
            cells,
            members,
            me,
        })
    }

    /// The offset, in every member's heap, of the cell kept for sender
    /// `from`.
    fn offset_for(&self, from: u32) -> u64 {
        self.cells.offset + (self.cells.flags + from as u64) * 8
    }

    /// The cell this PE keeps for member `from`.
    fn mine(&self, from: u32) -> &AtomicI64 {
        let i = self.cells.flags + from as u64;
        // SAFETY: `local` is the address of the group's cells, of which
        // `flags + flag_cells` fit (`new` checked `from` < `flag_cells`),
        // aligned 8-byte symmetric memory that lives as long as the
        // process.
        unsafe { AtomicI64::from_ptr((self.cells.local as *mut i64).add(i as usize)) }
    }

    /// Signals member `to` (after every write before it: the add is a
    /// release) and wakes it if it sleeps.
    pub(crate) fn signal(&self, to: u32) {
        let off = self.offset_for(self.me);
        let pe = self.members[to as usize];
        let sent = self
            .near
            .amo(pe, self.cells.window, off, Dtype::Int64, Amo::FetchAdd(1));
        debug_assert!(sent.is_some(), "a group's cells are in the shared heap");
    }

    /// Signals every other member.
    pub(crate) fn signal_all(&self) {
        for to in (0..self.members.len() as u32).filter(|m| *m != self.me) {
            self.signal(to);
        }
    }

    /// A barrier of the group: no member returns before every member has
    /// called it.
    ///
    /// Where each PE has a core (or waits sleep), every member signals
    /// every other and waits for all: one hop, and the waits overlap.
    /// Where PEs spinning outnumber the cores, a waiter sees a signal only
    /// once it is scheduled again, so the barrier's exit order is the
    /// scheduler's; there the members signal member 0, which waits for
    /// them all and then signals each (fan-in, fan-out): member 0 always
    /// leaves first — a root 0 after a barrier (a broadcast, a program's
    /// own puts from PE 0) starts before the others look for its data —
    /// for one more hop (docs/PERFORMANCE.md has both at 4 PEs on 2
    /// cores).
    pub(crate) fn barrier(&self, timeout: Duration) -> Result<(), Unheard> {
        if !self.near.oversubscribed() {
            self.signal_all();
            return self.take_all(timeout);
        }
        if self.me == 0 {
            self.take_all(timeout)?;
            self.signal_all();
            return Ok(());
        }
        self.signal(0);
        self.take(&[0], timeout).map_err(|e| self.unreleased(e))
    }

    /// What a member that member 0 has not released waits for: the
    /// members whose arrival member 0's cells do not show (read through
    /// shared memory), or member 0 itself when all the others arrived.
    fn unreleased(&self, e: Unheard) -> Unheard {
        let (n, me) = (self.members.len() as u32, self.me);
        let arrived = |s: u32| {
            let at = self
                .near
                .at(self.members[0], self.cells.window, self.offset_for(s), 8);
            at.is_some_and(|p| {
                // SAFETY: an aligned 8-byte flag cell of member 0's
                // mapped heap, which lives as long as the process.
                let cell = unsafe { AtomicI64::from_ptr(p.cast::<i64>()) };
                cell.load(Ordering::Acquire) > self.cells.base
            })
        };
        let mut missing: Vec<u32> = (1..n)
            .filter(|s| *s != me && !arrived(*s))
            .map(|s| self.members[s as usize])
            .collect();
        if missing.is_empty() {
            missing.push(self.members[0]);
        }
        Unheard {
            timeout: e.timeout,
            waiting_for: missing[0],
            not_heard_from: join(&missing),
        }
    }

    /// Waits for one signal from each member in `from`, and takes them
    /// (every write its sender made before it is then visible here).
    pub(crate) fn take(&self, from: &[u32], timeout: Duration) -> Result<(), Unheard> {
        self.take_from(|| from.iter().copied(), timeout)
    }

    /// Waits for one signal from every other member, and takes them.
    pub(crate) fn take_all(&self, timeout: Duration) -> Result<(), Unheard> {
        let (n, me) = (self.members.len() as u32, self.me);
        self.take_from(|| (0..n).filter(move |m| *m != me), timeout)
    }

    /// [`Flags::take`] over the senders `from()` lists (no list built:
    /// this is every small collective's and barrier's wait).
    fn take_from<I: Iterator<Item = u32>>(
        &self,
        from: impl Fn() -> I,
        timeout: Duration,
    ) -> Result<(), Unheard> {
        let base = self.cells.base;
        let ready = || from().all(|s| self.mine(s).load(Ordering::Acquire) > base);
        let me = self.members[self.me as usize];
        if !self.near.wait(me, Instant::now() + timeout, ready) {
            let missing: Vec<u32> = from()
                .filter(|s| self.mine(*s).load(Ordering::Acquire) <= base)
                .map(|s| self.members[s as usize])
                .collect();
            if !missing.is_empty() {
                return Err(Unheard {
                    timeout,
                    waiting_for: missing[0],
                    not_heard_from: join(&missing),
                });
            }
        }
        for s in from() {
            self.mine(s).fetch_sub(1, Ordering::AcqRel);
        }
        Ok(())
    }
}
