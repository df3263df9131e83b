//! The clocks that synchronising cells and the barrier carry.
//!
//! - A **signal cell** keeps, for each value it took, the join of the
//!   clocks of the notifies applied up to it. A wait (or test) that passes
//!   acquires the clock of the *first* value that satisfied it — not of
//!   everything applied by the time it looked — so a wait that passed on a
//!   stale value (a signal row reused without clearing) orders nothing
//!   after the notify it should have waited for, whether or not that
//!   notify happened to arrive before the wait looked.
//! - An **atomic cell** (fetch_add, compare_swap, atomic_add) keeps the
//!   join of the clocks of every atomic applied to it; a fetching atomic's
//!   reply carries it, so a lock or a counter built from them orders its
//!   users.
//! - A **barrier** carries each rank's clock on its dissemination signals
//!   (joined with everything the sender heard of that barrier); after the
//!   last round a rank holds the join of every rank's clock at entry.

use super::clock::VectorClock;
use crate::v1::Cmp;
use std::collections::{BTreeMap, HashMap};

/// How many values of one signal cell are remembered; a wait that passes
/// on an older one acquires the oldest kept (more ordering, never less
/// than the values it could have seen).
const HISTORY: usize = 64;

/// The history of one signal cell.
#[derive(Debug, Clone, Default)]
struct SignalHistory {
    /// (value after a notify, join of the clocks of the notifies up to it).
    values: Vec<(i32, VectorClock)>,
}

/// A rank's synchronising cells, keyed by (window index, byte offset).
#[derive(Debug, Clone, Default)]
pub struct Cells {
    signals: HashMap<(u32, u64), SignalHistory>,
    atomics: HashMap<(u32, u64), VectorClock>,
}

impl Cells {
    /// No cells yet.
    pub fn new() -> Cells {
        Cells::default()
    }

    /// A notify carrying `clock` left `cell` holding `value`.
    pub fn notified(&mut self, cell: (u32, u64), value: i32, clock: &VectorClock) {
        let h = self.signals.entry(cell).or_default();
        let mut joined = h.values.last().map(|(_, c)| c.clone()).unwrap_or_default();
        joined.join(clock);
        if h.values.len() == HISTORY {
            h.values.remove(0);
        }
        h.values.push((value, joined));
    }

    /// A wait or test on `cell` for `cmp expected` passed: the clock it
    /// acquires (`None` when no notify made it hold: the cell's initial
    /// value did, which orders nothing).
    pub fn passed(&self, cell: (u32, u64), cmp: Cmp, expected: i32) -> Option<&VectorClock> {
        let h = self.signals.get(&cell)?;
        let first = h.values.iter().find(|(v, _)| cmp.holds(*v, expected));
        // Not in the history: kept values were dropped (take the oldest
        // kept), or the cell's initial value held (nothing to acquire).
        let truncated = h.values.len() == HISTORY;
        first
            .or(if truncated { h.values.first() } else { None })
            .map(|(_, c)| c)
    }

    /// The owner cleared or overwrote `cell` itself: earlier notifies no
    /// longer explain its value.
    pub fn reset(&mut self, cell: (u32, u64)) {
        self.signals.remove(&cell);
    }

    /// An atomic carrying `clock` was applied to `cell`: returns the clock
    /// a fetching atomic's reply carries (every atomic on the cell so far).
    pub fn atomic(&mut self, cell: (u32, u64), clock: &VectorClock) -> VectorClock {
        let c = self.atomics.entry(cell).or_default();
        c.join(clock);
        c.clone()
    }
}

/// One rank's clocks for the barriers it runs: what each epoch's signals
/// carry in and out.
#[derive(Debug, Clone, Default)]
pub struct BarrierClocks {
    /// epoch → the join of the clocks heard for it (kept when a signal of
    /// the next epoch arrives early, like the barrier keeps the signal).
    heard: BTreeMap<u64, VectorClock>,
}

impl BarrierClocks {
    /// No barrier heard of yet.
    pub fn new() -> BarrierClocks {
        BarrierClocks::default()
    }

    /// A signal of barrier `epoch` carrying `clock` arrived.
    pub fn heard(&mut self, epoch: u64, clock: &VectorClock) {
        self.heard.entry(epoch).or_default().join(clock);
    }

    /// The clock a signal of barrier `epoch` sent now carries: the rank's
    /// clock at entry (`entry`) joined with what it heard of the epoch.
    pub fn outgoing(&self, epoch: u64, entry: &VectorClock) -> VectorClock {
        let mut c = entry.clone();
        if let Some(h) = self.heard.get(&epoch) {
            c.join(h);
        }
        c
    }

    /// Barrier `epoch` completed: the clock the rank acquires (everyone's
    /// at entry), and the epoch's record is dropped.
    pub fn finish(&mut self, epoch: u64, entry: &VectorClock) -> VectorClock {
        let c = self.outgoing(epoch, entry);
        self.heard.remove(&epoch);
        c
    }
}
