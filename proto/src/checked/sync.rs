//! The clocks that synchronising cells and the barrier carry.
//!
//! - A **signal cell** keeps its value as units, each with the clock of
//!   the notify that added it, oldest first: an add of v appends v units,
//!   a set replaces them, an add of −k (a credit taken back) removes the
//!   k oldest. A wait for `>= e` that passes acquires the clocks of the e
//!   oldest units — the notifies it needed, not everything applied by the
//!   time it looked — so a wait that passed on a stale unit (a signal row
//!   reused without clearing) orders nothing after the notify it should
//!   have waited for, and a credit consumed and given again orders each
//!   use by its own notify, whatever the timing.
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

/// The most units a cell keeps (a counter that only grows keeps its
/// oldest; a wait beyond them acquires every kept unit).
const MAX_UNITS: u64 = 1 << 20;
/// The most runs a cell keeps: past it the two oldest merge (their units
/// then carry the join of both clocks — more ordering for old units, never
/// less), so a counter notified forever costs bounded memory.
const MAX_RUNS: usize = 4096;

/// The units of one signal cell: runs of (count, clock), oldest first.
#[derive(Debug, Clone, Default)]
struct Units {
    runs: std::collections::VecDeque<(u64, VectorClock)>,
    total: u64,
}

impl Units {
    fn push(&mut self, n: u64, clock: &VectorClock) {
        let n = n.min(MAX_UNITS.saturating_sub(self.total));
        if n > 0 {
            self.runs.push_back((n, clock.clone()));
            self.total += n;
        }
        if self.runs.len() > MAX_RUNS
            && let Some((n0, c0)) = self.runs.pop_front()
            && let Some(next) = self.runs.front_mut()
        {
            next.0 += n0;
            next.1.join(&c0);
        }
    }

    fn pop(&mut self, mut n: u64) {
        while n > 0 {
            let Some(front) = self.runs.front_mut() else {
                return;
            };
            let take = front.0.min(n);
            front.0 -= take;
            self.total -= take;
            n -= take;
            if front.0 == 0 {
                self.runs.pop_front();
            }
        }
    }

    /// The oldest runs whose clocks `clock` covers become one run with
    /// the zero clock (a later run's clock is not covered just because an
    /// earlier one is; the order of units matters, so only a prefix).
    fn forget_ordered_before(&mut self, clock: &VectorClock) {
        let mut covered = 0;
        while let Some((n, c)) = self.runs.front() {
            if !c.le(clock) {
                break;
            }
            covered += n;
            self.runs.pop_front();
        }
        if covered > 0 {
            self.runs.push_front((covered, VectorClock::default()));
        }
    }

    /// The join of the clocks of the `n` oldest units.
    fn oldest(&self, mut n: u64) -> Option<VectorClock> {
        let mut c: Option<VectorClock> = None;
        for (count, clock) in &self.runs {
            if n == 0 {
                break;
            }
            c.get_or_insert_with(VectorClock::default).join(clock);
            n = n.saturating_sub(*count);
        }
        c
    }
}

/// A rank's synchronising cells, keyed by (window index, byte offset).
#[derive(Debug, Clone, Default)]
pub struct Cells {
    signals: HashMap<(u32, u64), Units>,
    atomics: HashMap<(u32, u64), VectorClock>,
}

impl Cells {
    /// No cells yet.
    pub fn new() -> Cells {
        Cells::default()
    }

    /// A notify carrying `clock` was applied to `cell`: an add of `value`
    /// (`add`), or a set to it.
    pub fn notified(&mut self, cell: (u32, u64), add: bool, value: i32, clock: &VectorClock) {
        let u = self.signals.entry(cell).or_default();
        if !add {
            *u = Units::default();
        }
        if value >= 0 {
            u.push(u64::from(value.unsigned_abs()), clock);
        } else {
            u.pop(u64::from(value.unsigned_abs()));
        }
    }

    /// A wait or test on `cell` for `cmp expected` passed: the clock it
    /// acquires — the notifies of the units the comparison needed (`None`
    /// when none: the cell's initial value satisfied it).
    pub fn passed(&self, cell: (u32, u64), cmp: Cmp, expected: i32) -> Option<VectorClock> {
        let u = self.signals.get(&cell)?;
        let needed = match cmp {
            Cmp::Ge | Cmp::Eq => u64::try_from(expected).unwrap_or(0),
            Cmp::Gt => u64::try_from(expected).map_or(0, |e| e + 1),
            // Waiting for a value to fall (or to differ): every unit kept.
            _ => u.total,
        };
        u.oldest(needed)
    }

    /// The owner cleared or overwrote `cell` itself: earlier notifies no
    /// longer explain its value.
    pub fn reset(&mut self, cell: (u32, u64)) {
        self.signals.remove(&cell);
    }

    /// The owner wrote `bytes` of `window` itself: every signal cell among
    /// them forgets its notifies.
    pub fn reset_range(&mut self, window: u32, bytes: std::ops::Range<u64>) {
        self.signals
            .retain(|(w, at), _| *w != window || !bytes.contains(at));
    }

    /// Forgets what happens before `clock` — every rank holds it (see
    /// [`super::Detector::barrier_passed`]), so acquiring it orders
    /// nothing more: atomic cells whose clock it covers go, and a signal
    /// cell's oldest units whose clocks it covers become one run with no
    /// clock (their count still matters to the waits that need them).
    pub fn forget_ordered_before(&mut self, clock: &VectorClock) {
        self.atomics.retain(|_, c| !c.le(clock));
        for u in self.signals.values_mut() {
            u.forget_ordered_before(clock);
        }
        self.signals.retain(|_, u| !u.runs.is_empty());
    }

    /// How many cells keep a clock (their cost).
    pub fn len(&self) -> usize {
        self.signals.len() + self.atomics.len()
    }

    /// Whether no cell keeps a clock.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
