//! The barrier of a team or an active set: pld's dissemination barrier
//! (`pld_proto::barrier`, the state machine the rank's own barrier runs)
//! over the members, its signals carried by one-sided atomic adds into
//! symmetric cells — a team's cells in the library's reserved heap bytes,
//! an active set's in the `pSync` array the program passes.
//!
//! A cell counts the signals of one (epoch parity, round) not yet taken:
//! a barrier's messages span at most two epochs, so the parity names the
//! epoch. Taking a signal decrements the cell, so that a `pSync` array
//! holds `SHMEM_SYNC_VALUE` again once every signal is taken, as the
//! specification requires of it between calls.

use crate::near::Amo;
use crate::pe::Pe;
use pld_proto::Dtype;
use pld_proto::barrier::{Advance, Barrier, Missing, join, rounds, signaller};
use pld_server::WindowId;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// Rounds a cell array has room for: teams of up to 2^32 members.
pub(crate) const MAX_ROUNDS: u32 = 32;
/// Cells of a barrier: two epoch parities of [`MAX_ROUNDS`] rounds.
pub(crate) const BARRIER_CELLS: u64 = 2 * MAX_ROUNDS as u64;
/// The cell after the barrier's, where a collective keeps a count
/// (`collect`'s element count) for the others to read.
pub(crate) const COUNT_CELL: u64 = BARRIER_CELLS;
/// Cells a sync area holds: what `SHMEM_*_SYNC_SIZE` must cover.
pub(crate) const SYNC_CELLS: u64 = BARRIER_CELLS + 1;

/// How often a wait looks again without a change.
const RECHECK: Duration = Duration::from_millis(20);

/// A sync area: [`SYNC_CELLS`] 8-byte cells, at the same window and
/// offset on every member, and their value when no signal is pending.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cells {
    /// The window.
    pub window: WindowId,
    /// The offset of the first cell.
    pub offset: u64,
    /// The first cell's address in this process.
    pub local: usize,
    /// A cell's value with no signal pending: 0 for a team's cells,
    /// `SHMEM_SYNC_VALUE` (-1) for a `pSync` array.
    pub base: i64,
    /// The first of the cells the one-round collectives signal in
    /// (`team::flags`), and how many there are: the most members those
    /// collectives serve.
    pub flags: u64,
    pub flag_cells: u64,
}

impl Cells {
    fn cell(&self, i: u64) -> &AtomicI64 {
        // SAFETY: `local` is the address of SYNC_CELLS aligned 8-byte
        // cells of symmetric memory, which lives as long as the process.
        unsafe { AtomicI64::from_ptr((self.local as *mut i64).add(i as usize)) }
    }

    fn index(epoch: u64, round: u32) -> u64 {
        (epoch % 2) * MAX_ROUNDS as u64 + round as u64
    }

    /// The count cell's address here, and its offset in the window.
    pub(crate) fn count(&self) -> (*mut i64, u64) {
        let p = (self.local as *mut i64).wrapping_add(COUNT_CELL as usize);
        (p, self.offset + COUNT_CELL * 8)
    }

    fn pending(&self, rounds: u32) -> bool {
        (0..2).any(|parity| {
            (0..rounds).any(|r| {
                self.cell(parity * MAX_ROUNDS as u64 + r as u64)
                    .load(Ordering::Acquire)
                    > self.base
            })
        })
    }
}

/// One team's (or active set's) barrier: the state machine and its cells.
pub(crate) struct SyncArea {
    cells: Cells,
    barrier: Mutex<Barrier>,
}

/// A barrier that could not complete.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    /// A signal could not be sent.
    #[error("could not signal PE {pe} in round {round}: {source}")]
    Signal {
        pe: u32,
        round: u32,
        source: pld_server::Error,
    },
    /// The deadline passed.
    #[error(
        "timed out after {timeout:?} in epoch {epoch}, round {round} of {rounds}: waiting for PE {waiting_for}; not heard from PEs {not_heard_from}{unreachable}"
    )]
    Timeout {
        timeout: Duration,
        epoch: u64,
        round: u32,
        rounds: u32,
        waiting_for: u32,
        not_heard_from: String,
        unreachable: String,
    },
}

impl SyncArea {
    /// The barrier of member `me` of `n`, over `cells`.
    pub(crate) fn new(me: u32, n: u32, cells: Cells) -> SyncArea {
        SyncArea {
            cells,
            barrier: Mutex::new(Barrier::new(me, n)),
        }
    }

    /// The sync area.
    pub(crate) fn cells(&self) -> Cells {
        self.cells
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Barrier> {
        self.barrier.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The signals waiting in the cells, as (cell, count).
    fn pending_signals(&self, n: u32) -> Vec<(u64, i64)> {
        let mut out = Vec::new();
        for round in 0..rounds(n) {
            for parity in 0..2u64 {
                let i = parity * MAX_ROUNDS as u64 + round as u64;
                let v = self.cells.cell(i).load(Ordering::Acquire) - self.cells.base;
                if v > 0 {
                    out.push((i, v));
                }
            }
        }
        out
    }

    /// Takes every pending signal: decrements its cell (an atomic through
    /// the rank, so that `--checked` sees the signaller's atomic and this
    /// one on the same cell, and orders what came before the signal
    /// before what comes after the barrier), then feeds the state machine.
    async fn drain(&self, p: &Pe, me: u32, n: u32) -> Result<(), SyncError> {
        for (i, count) in self.pending_signals(n) {
            let offset = self.cells.offset + i * 8;
            let here = p.rank().rank();
            for _ in 0..count {
                let take = Amo::FetchAdd(-1);
                let near = p.near();
                if near
                    .and_then(|n| n.amo(here, self.cells.window, offset, Dtype::Int64, take))
                    .is_some()
                {
                    continue;
                }
                p.rank()
                    .fetch_add(here, self.cells.window, offset, Dtype::Int64, -1)
                    .await
                    .map_err(|source| SyncError::Signal {
                        pe: here,
                        round: (i % MAX_ROUNDS as u64) as u32 + 1,
                        source,
                    })?;
            }
            let (parity, round) = (i / MAX_ROUNDS as u64, (i % MAX_ROUNDS as u64) as u32);
            let mut b = self.lock();
            for _ in 0..count {
                let now = b.epoch();
                let epoch = if now % 2 == parity { now } else { now + 1 };
                if let Err(e) = b.on_message(signaller(me, n, round), epoch, round) {
                    tracing::warn!(round, epoch, error = %e, "team barrier signal dropped");
                }
            }
        }
        Ok(())
    }

    /// Runs one barrier of `members` (global PEs, in member order), this
    /// PE being member `me`.
    pub(crate) async fn run(&self, p: &Pe, members: &[u32], me: u32) -> Result<(), SyncError> {
        let n = members.len() as u32;
        let timeout = p.sync_timeout();
        let entered = Instant::now();
        let deadline = entered + timeout;
        self.lock().enter(entered);
        let mut out = Vec::new();
        loop {
            self.drain(p, me, n).await?;
            let advance = self.lock().advance(&mut out);
            for s in out.drain(..) {
                let pe = members[s.to as usize];
                let offset = self.cells.offset + Cells::index(s.epoch, s.round) * 8;
                // A fetch_add, not an atomic_add: the target joins a
                // fetching atomic's clock into the cell (`--checked`), and
                // the drain's fetch_add there acquires it.
                let signal = Amo::FetchAdd(1);
                let near = p.near();
                if near
                    .and_then(|n| n.amo(pe, self.cells.window, offset, Dtype::Int64, signal))
                    .is_some()
                {
                    continue;
                }
                let sent = p
                    .rank()
                    .fetch_add_nb(pe, self.cells.window, offset, Dtype::Int64, 1)
                    .await
                    .and_then(|h| h.detach());
                if let Err(source) = sent {
                    return Err(SyncError::Signal {
                        pe,
                        round: s.round + 1,
                        source,
                    });
                }
            }
            if !matches!(advance, Advance::Waiting) {
                return Ok(());
            }
            let rounds = rounds(n);
            let pending = || self.cells.pending(rounds);
            // Through shared memory the signal is often there already:
            // look before reading the clock.
            if p.near().is_some() && pending() {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let missing = self.lock().missing();
                if let Some(m) = missing {
                    return Err(timeout_error(p, members, m, timeout).await);
                }
                return Ok(());
            }
            match p.near() {
                Some(near) => {
                    near.wait(p.rank().rank(), deadline, pending);
                }
                None => {
                    p.rank().watch(left.min(RECHECK), pending).await;
                }
            }
        }
    }
}

async fn timeout_error(p: &Pe, members: &[u32], m: Missing, timeout: Duration) -> SyncError {
    let pe = |i: u32| members[i as usize];
    let not_heard: Vec<u32> = m.not_heard_from.iter().map(|i| pe(*i)).collect();
    let unreachable = p.rank().unreachable(&not_heard).await;
    let unreachable = match unreachable.is_empty() {
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
    SyncError::Timeout {
        timeout,
        epoch: m.epoch,
        round: m.round + 1,
        rounds: m.rounds,
        waiting_for: pe(m.waiting_for),
        not_heard_from: join(&not_heard),
        unreachable,
    }
}
