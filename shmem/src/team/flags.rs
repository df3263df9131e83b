//! One-way signals between the members of a team or an active set, for
//! the collectives that run in one round through shared memory: member
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
    "timed out after {timeout:?} in a one-round collective, waiting for PE {waiting_for}; not heard from PEs {not_heard_from}"
)]
pub(crate) struct Unheard {
    pub timeout: Duration,
    pub waiting_for: u32,
    pub not_heard_from: String,
}

impl<'a> Flags<'a> {
    /// The flags of `members` over `cells`, if the group fits its cells.
    pub(crate) fn new(near: &'a Near, cells: Cells, members: &'a [u32], me: u32) -> Option<Self> {
        (members.len() as u64 <= cells.flag_cells).then_some(Flags {
            near,
            cells,
            members,
            me,
        })
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
        let off = self.cells.offset + (self.cells.flags + self.me as u64) * 8;
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

    /// Waits for one signal from each member in `from`, and takes them
    /// (every write its sender made before it is then visible here).
    pub(crate) fn take(&self, from: &[u32], timeout: Duration) -> Result<(), Unheard> {
        let base = self.cells.base;
        let ready = || {
            from.iter()
                .all(|s| self.mine(*s).load(Ordering::Acquire) > base)
        };
        let me = self.members[self.me as usize];
        if !self.near.wait(me, Instant::now() + timeout, ready) {
            let missing: Vec<u32> = from
                .iter()
                .filter(|s| self.mine(**s).load(Ordering::Acquire) <= base)
                .map(|s| self.members[*s as usize])
                .collect();
            if !missing.is_empty() {
                return Err(Unheard {
                    timeout,
                    waiting_for: missing[0],
                    not_heard_from: join(&missing),
                });
            }
        }
        for s in from {
            self.mine(*s).fetch_sub(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Waits for one signal from every other member, and takes them.
    pub(crate) fn take_all(&self, timeout: Duration) -> Result<(), Unheard> {
        let others: Vec<u32> = (0..self.members.len() as u32)
            .filter(|m| *m != self.me)
            .collect();
        self.take(&others, timeout)
    }
}
