//! Checked mode in a rank: the driver of `pld_proto::checked`'s rules.
//!
//! The origin stamps every request it sends with its clock (a notify or
//! an atomic is a release point: the clock is sent, then advanced); the
//! target records each access in the window's shadow under the sender's
//! clock, joins notifies into the signal cell and atomics into the cell,
//! and answers a fetching atomic with the cell's clock. The owner's own
//! accesses (a local put or get, the device's `pl.load` / `pl.store` of
//! its window) are recorded under its own clock; a wait that passes
//! acquires the clock of the notifies that satisfied it; a barrier
//! carries clocks on its signals and acquires everyone's at its end.
//! Reports go to the log, to `Stats::races`, and to [`Checked::reports`];
//! in strict mode the racing request fails with `ERROR_CODE_RACE`.

use crate::trace::Trace;
use pld_proto::checked::sync::{BarrierClocks, Cells};
use pld_proto::checked::{Access, AccessKind, Detector, Epoch, Race, RankClock, VectorClock};
use pld_proto::lock::Locked;
use pld_proto::v1::{CheckedStamp, header::Body};
use pld_proto::{Cmp, NotifyOp, OpKind};
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// Whether a rank runs the race detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckedMode {
    /// No detector: nothing is recorded and no message carries a clock.
    #[default]
    Off,
    /// Races are reported; every op still runs.
    On,
    /// Races are reported and the racing request fails.
    Strict,
}

impl std::str::FromStr for CheckedMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "" | "on" | "true" => Ok(CheckedMode::On),
            "strict" => Ok(CheckedMode::Strict),
            "off" | "false" => Ok(CheckedMode::Off),
            other => Err(format!("--checked={other}: on, strict or off")),
        }
    }
}

impl std::fmt::Display for CheckedMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CheckedMode::Off => "off",
            CheckedMode::On => "on",
            CheckedMode::Strict => "strict",
        })
    }
}

#[derive(Debug)]
struct Inner {
    clock: RankClock,
    barriers: u64,
    barrier_entry: VectorClock,
    barrier_clocks: BarrierClocks,
    cells: Cells,
    detector: Detector,
    reports: Vec<Race>,
    /// The windows whose shadow went over its budget, reported once each.
    over_budget: Vec<bool>,
}

/// What checked mode counts, for `Stats`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CheckedCounters {
    pub races: u64,
    pub ranges: u64,
    pub forgotten: u64,
}

/// One rank's race detector.
#[derive(Debug)]
pub struct Checked {
    rank: u32,
    nranks: u32,
    strict: bool,
    inner: Mutex<Inner>,
    /// The timeline, with `--trace`: each race goes on it too.
    trace: Option<Arc<Trace>>,
}

/// The wire form of a clock.
fn stamp(clock: &VectorClock, barriers: u64) -> CheckedStamp {
    CheckedStamp {
        clock: clock.as_wire().to_vec(),
        barriers,
    }
}

impl Checked {
    /// The detector of rank `rank` of `n`, whose windows are `windows` in
    /// wire order; `None` when `mode` is off.
    pub(crate) fn new(
        mode: CheckedMode,
        rank: u32,
        n: u32,
        windows: &[String],
        trace: Option<Arc<Trace>>,
    ) -> Option<Arc<Checked>> {
        if mode == CheckedMode::Off {
            return None;
        }
        Some(Arc::new(Checked {
            rank,
            nranks: n,
            strict: mode == CheckedMode::Strict,
            trace,
            inner: Mutex::new(Inner {
                clock: RankClock::new(rank, n),
                barriers: 0,
                barrier_entry: VectorClock::zero(n),
                barrier_clocks: BarrierClocks::new(),
                cells: Cells::new(),
                detector: Detector::new(rank, windows),
                reports: Vec::new(),
                over_budget: vec![false; windows.len()],
            }),
        }))
    }

    /// A peer's clock, cut to the cluster's ranks (a longer one from a
    /// broken peer must not grow this rank's clock).
    fn clock_of(&self, s: &CheckedStamp) -> VectorClock {
        let n = s.clock.len().min(self.nranks as usize);
        VectorClock::from_wire(s.clock[..n].to_vec())
    }

    /// Every race reported so far (each once).
    pub fn reports(&self) -> Vec<Race> {
        self.inner.locked().reports.clone()
    }

    /// Races seen, repeats included.
    pub fn races(&self) -> u64 {
        self.inner.locked().detector.races()
    }

    /// The races seen, the ranges the shadows keep and those forgotten
    /// over their budget.
    pub(crate) fn counters(&self) -> CheckedCounters {
        let i = self.inner.locked();
        CheckedCounters {
            races: i.detector.races(),
            ranges: i.detector.ranges() as u64,
            forgotten: i.detector.forgotten_total(),
        }
    }

    /// The stamp a request `body` carries; a notify or an atomic is a
    /// release point.
    fn stamp_request(&self, body: &Body) -> CheckedStamp {
        let mut i = self.inner.locked();
        let released = OpKind::of_request(body).is_some_and(OpKind::releases);
        let clock = if released {
            i.clock.release()
        } else {
            i.clock.clock().clone()
        };
        stamp(&clock, i.barriers)
    }

    /// A reply's stamp (a fetching atomic's): everything it carries
    /// happens before what this rank does next.
    pub(crate) fn acquire(&self, s: &CheckedStamp) {
        self.inner.locked().clock.acquire(&self.clock_of(s));
    }

    /// Records an access to `bytes` of window `window`: by a peer (`from`:
    /// its rank, op id and stamp) or, with `None`, by this rank itself.
    /// Returns the report of the first race it makes, for strict mode.
    pub(crate) fn access(
        &self,
        window: u32,
        bytes: &[Range<u64>],
        kind: AccessKind,
        from: Option<(u32, u64, &CheckedStamp)>,
    ) -> Result<(), String> {
        let mut i = self.inner.locked();
        let (access, clock) = match from {
            Some((peer, op, s)) => {
                let clock = self.clock_of(s);
                let at = Epoch {
                    rank: peer,
                    tick: clock.get(peer),
                };
                (access(at, kind, op, s.barriers), clock)
            }
            None => (
                access(i.clock.epoch(), kind.own(), 0, i.barriers),
                i.clock.clock().clone(),
            ),
        };
        // Strict: a racing access is refused, so it is checked first and
        // recorded only if nothing races (it never happens otherwise).
        let mut first = None;
        if self.strict {
            for b in bytes {
                let (raced, fresh) = i.detector.check(window, b.clone(), &access, &clock);
                for race in fresh {
                    first.get_or_insert_with(|| race.to_string());
                    self.report(&mut i, race);
                }
                if raced && first.is_none() {
                    let name = i.detector.window_name(window).unwrap_or("?");
                    first = Some(format!(
                        "race on rank {}'s window '{name}' bytes {}..{}: the access races one reported before (see the log)",
                        self.rank, b.start, b.end
                    ));
                }
            }
        }
        if first.is_none() {
            for b in bytes {
                for race in i.detector.access(window, b.clone(), &access, &clock) {
                    self.report(&mut i, race);
                }
            }
            self.report_budget(&mut i, window);
        }
        first.map_or(Ok(()), Err)
    }

    /// Reports a race: the log, the timeline, the reports.
    fn report(&self, i: &mut Inner, race: Race) {
        tracing::warn!("{race}");
        if let Some(t) = &self.trace {
            t.race([race.first.rank(), race.second.rank()], race.to_string());
        }
        i.reports.push(race);
    }

    /// Says, once per window, that its shadow went over its budget.
    fn report_budget(&self, i: &mut Inner, window: u32) {
        let w = window as usize;
        if i.over_budget.get(w).copied().unwrap_or(true) {
            return;
        }
        if let Some((name, n)) = i.detector.forgotten().nth(w)
            && n > 0
        {
            tracing::warn!(
                "checked mode: the shadow of rank {}'s window '{name}' holds its budget of {} ranges; \
                 the least recently touched are forgotten, and races with the accesses they held \
                 are not reported (Stats checked_forgotten counts them). Barriers let the shadow \
                 forget what they order.",
                self.rank,
                pld_proto::checked::DEFAULT_MAX_RANGES
            );
            i.over_budget[w] = true;
        }
    }

    /// Applies a notify (`op` of `value`) to signal cell (`window`,
    /// `offset`) — a peer's stamped `from`, or this rank's own (a release)
    /// — and records its clock before any waiter can act on it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn notify<T, E>(
        &self,
        window: u32,
        offset: u64,
        from: Option<&CheckedStamp>,
        op: NotifyOp,
        value: i32,
        apply: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let mut i = self.inner.locked();
        let clock = match from {
            Some(s) => self.clock_of(s),
            None => i.clock.release(),
        };
        let applied = apply()?;
        let add = op == NotifyOp::AtomicAdd;
        i.cells.notified((window, offset), add, value, &clock);
        Ok(applied)
    }

    /// Applies a fetching atomic to cell (`window`, `offset`) — a peer's
    /// stamped `from`, or this rank's own (release, then acquire) — and
    /// returns its result with the stamp its reply carries: every atomic
    /// on the cell so far, in the order they were applied.
    pub(crate) fn atomic<T, E>(
        &self,
        window: u32,
        offset: u64,
        from: Option<&CheckedStamp>,
        apply: impl FnOnce() -> Result<T, E>,
    ) -> Result<(T, CheckedStamp), E> {
        let mut i = self.inner.locked();
        let clock = match from {
            Some(s) => self.clock_of(s),
            None => i.clock.release(),
        };
        let value = apply()?;
        let joined = i.cells.atomic((window, offset), &clock);
        if from.is_none() {
            i.clock.acquire(&joined);
        }
        Ok((value, stamp(&joined, i.barriers)))
    }

    /// A wait or test on cell (`window`, `offset`) for `cmp expected` passed.
    pub(crate) fn waited(&self, window: u32, offset: u64, cmp: Cmp, expected: i32) {
        let mut i = self.inner.locked();
        if let Some(c) = i.cells.passed((window, offset), cmp, expected) {
            i.clock.acquire(&c);
        }
    }

    /// The owner wrote bytes of a window itself: the notifies before no
    /// longer explain the signal cells among them.
    pub(crate) fn overwrote_cells(&self, window: u32, bytes: Range<u64>) {
        self.inner.locked().cells.reset_range(window, bytes);
    }

    /// This rank enters a barrier: a release.
    pub(crate) fn barrier_enter(&self) {
        let mut i = self.inner.locked();
        i.barrier_entry = i.clock.release();
    }

    /// The clock a frame with `body` carries: for a barrier signal, what
    /// this rank heard of that barrier; for a request, this rank's clock.
    pub(crate) fn stamp_for(&self, body: &Body) -> CheckedStamp {
        match body {
            Body::Barrier(b) => self.barrier_stamp(b.epoch),
            b => self.stamp_request(b),
        }
    }

    /// The stamp a signal of barrier `epoch` carries.
    fn barrier_stamp(&self, epoch: u64) -> CheckedStamp {
        let i = self.inner.locked();
        stamp(
            &i.barrier_clocks.outgoing(epoch, &i.barrier_entry),
            i.barriers,
        )
    }

    /// A signal of barrier `epoch` stamped `s` arrived.
    pub(crate) fn barrier_heard(&self, epoch: u64, s: &CheckedStamp) {
        self.inner
            .locked()
            .barrier_clocks
            .heard(epoch, &self.clock_of(s));
    }

    /// Barrier `epoch` completed on this rank.
    pub(crate) fn barrier_done(&self, epoch: u64) {
        let mut i = self.inner.locked();
        let entry = i.barrier_entry.clone();
        let all = i.barrier_clocks.finish(epoch, &entry);
        i.clock.acquire(&all);
        i.barriers += 1;
        if let Some(before) = i.detector.barrier_passed(&all) {
            i.cells.forget_ordered_before(&before);
        }
    }
}

fn access(at: Epoch, kind: AccessKind, op: u64, barriers: u64) -> Access {
    Access {
        at,
        kind,
        op,
        barrier_epoch: barriers,
        site: Arc::from(""),
    }
}
