//! An in-memory cluster of checked ranks running straight-line programs,
//! with a seeded scheduler that picks which rank runs and which link
//! delivers next — so a test can run one program under many interleavings
//! and check that the reports never change. Each (origin, target) link is
//! FIFO, as the real streams are; the real barrier state machine runs the
//! barriers.

use super::sync::{BarrierClocks, Cells};
use super::{Access, AccessKind, Detector, Epoch, RankClock, VectorClock};
use crate::barrier::harness::Rng;
use crate::barrier::{Barrier, Progress, Signal};
use crate::v1::Cmp;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// The data window; signal cells live apart, in window 1.
pub const DATA: u32 = 0;

/// One step of a rank's program.
#[derive(Debug, Clone)]
pub enum Step {
    /// The owner writes its own data window.
    Store(Range<u64>, &'static str),
    /// The owner reads its own data window.
    Load(Range<u64>, &'static str),
    /// A blocking access to `peer`'s data window.
    Remote(AccessKind, u32, Range<u64>, &'static str),
    /// Notify `peer`'s signal cell (`u32::MAX`: its own): add (`true`) or
    /// set `value`.
    Notify(u32, u64, bool, i32),
    /// Wait on the own signal cell for `cmp expected`.
    Wait(u64, Cmp, i32),
    /// The owner clears its own signal cell to 0.
    Clear(u64),
    /// A barrier.
    Barrier,
}

#[derive(Debug, Clone)]
enum Msg {
    Access(AccessKind, Range<u64>, u64, VectorClock, u64, Arc<str>),
    Notify(u64, bool, i32, VectorClock),
    Reply(u64, Option<VectorClock>),
    Barrier(Signal, VectorClock),
}

#[derive(Debug, Clone, PartialEq)]
enum Blocked {
    No,
    Reply(u64),
    Barrier,
}

#[derive(Debug, Clone)]
struct Rank {
    program: Vec<Step>,
    pc: usize,
    clock: RankClock,
    barrier: Barrier,
    barrier_clocks: BarrierClocks,
    entry: VectorClock,
    barriers_done: u64,
    detector: Detector,
    cells: Cells,
    values: HashMap<u64, i32>,
    blocked: Blocked,
    next_op: u64,
}

/// The cluster.
#[derive(Debug)]
pub struct Sim {
    ranks: Vec<Rank>,
    links: BTreeMap<(u32, u32), VecDeque<Msg>>,
    /// Every report, rendered, in the order made.
    pub reports: Vec<String>,
    now: Instant,
}

impl Sim {
    /// Rank r runs `programs[r]`.
    pub fn new(programs: Vec<Vec<Step>>) -> Sim {
        let n = programs.len() as u32;
        let ranks = programs
            .into_iter()
            .enumerate()
            .map(|(r, program)| Rank {
                program,
                pc: 0,
                clock: RankClock::new(r as u32, n),
                barrier: Barrier::new(r as u32, n),
                barrier_clocks: BarrierClocks::new(),
                entry: VectorClock::zero(n),
                barriers_done: 0,
                detector: Detector::new(r as u32, &["data"]),
                cells: Cells::new(),
                values: HashMap::new(),
                blocked: Blocked::No,
                next_op: 1,
            })
            .collect();
        Sim {
            ranks,
            links: BTreeMap::new(),
            reports: Vec::new(),
            now: Instant::now(),
        }
    }

    /// Runs to the end under the interleaving `seed` picks; panics on a
    /// deadlock (a program that cannot finish).
    pub fn run(self, seed: u64) -> Vec<String> {
        self.run_to_end(seed).reports
    }

    /// The ranges each rank's shadows keep.
    pub fn ranges(&self) -> Vec<usize> {
        self.ranks.iter().map(|r| r.detector.ranges()).collect()
    }

    /// As [`Sim::run`], the cluster at the end.
    pub fn run_to_end(mut self, seed: u64) -> Sim {
        let mut rng = Rng::new(seed);
        loop {
            // (u32::MAX, r): rank r runs its next step; (from, to): the
            // link delivers its oldest message.
            let mut choices: Vec<(u32, u32)> = (0..self.ranks.len())
                .filter(|&r| self.can_step(r))
                .map(|r| (u32::MAX, r as u32))
                .collect();
            choices.extend(
                self.links
                    .iter()
                    .filter(|(_, q)| !q.is_empty())
                    .map(|(k, _)| *k),
            );
            if choices.is_empty() {
                let done = self.ranks.iter().all(|r| r.pc == r.program.len());
                assert!(done, "seed {seed}: the programs deadlocked");
                return self;
            }
            match choices[rng.below(choices.len())] {
                (u32::MAX, r) => self.step(r as usize),
                (from, to) => self.deliver(from, to),
            }
        }
    }

    fn can_step(&self, r: usize) -> bool {
        let rank = &self.ranks[r];
        if rank.blocked != Blocked::No || rank.pc >= rank.program.len() {
            return false;
        }
        match &rank.program[rank.pc] {
            Step::Wait(cell, cmp, expected) => {
                cmp.holds(rank.values.get(cell).copied().unwrap_or(0), *expected)
            }
            _ => true,
        }
    }

    fn send(&mut self, from: usize, to: u32, msg: Msg) {
        self.links
            .entry((from as u32, to))
            .or_default()
            .push_back(msg);
    }

    fn record(&mut self, r: usize, access: &Access, bytes: Range<u64>, clock: &VectorClock) {
        let races = self.ranks[r].detector.access(DATA, bytes, access, clock);
        self.reports.extend(races.iter().map(ToString::to_string));
    }

    fn step(&mut self, r: usize) {
        let step = self.ranks[r].program[self.ranks[r].pc].clone();
        self.ranks[r].pc += 1;
        let rank = &mut self.ranks[r];
        let local = |kind, site: &str, rank: &Rank| Access {
            at: rank.clock.epoch(),
            kind,
            op: 0,
            barrier_epoch: rank.barriers_done,
            site: Arc::from(site),
        };
        match step {
            Step::Store(bytes, site) => {
                let a = local(AccessKind::Store, site, rank);
                let clock = rank.clock.clock().clone();
                self.record(r, &a, bytes, &clock);
            }
            Step::Load(bytes, site) => {
                let a = local(AccessKind::Load, site, rank);
                let clock = rank.clock.clock().clone();
                self.record(r, &a, bytes, &clock);
            }
            Step::Remote(kind, peer, bytes, site) => {
                let op = rank.next_op;
                rank.next_op += 1;
                rank.blocked = Blocked::Reply(op);
                let msg = Msg::Access(
                    kind,
                    bytes,
                    op,
                    rank.clock.clock().clone(),
                    rank.barriers_done,
                    Arc::from(site),
                );
                self.send(r, peer, msg);
            }
            Step::Notify(peer, cell, add, value) => {
                let clock = rank.clock.release();
                if peer == u32::MAX {
                    // Its own cell (a credit taken back): no message.
                    let v = rank.values.entry(cell).or_insert(0);
                    *v = if add { v.wrapping_add(value) } else { value };
                    rank.cells.notified((1, cell), add, value, &clock);
                } else {
                    self.send(r, peer, Msg::Notify(cell, add, value, clock));
                }
            }
            Step::Wait(cell, cmp, expected) => {
                if let Some(c) = rank.cells.passed((1, cell), cmp, expected) {
                    rank.clock.acquire(&c);
                }
            }
            Step::Clear(cell) => {
                rank.values.insert(cell, 0);
                rank.cells.reset((1, cell));
            }
            Step::Barrier => {
                rank.entry = rank.clock.release();
                rank.barrier.enter(self.now);
                rank.blocked = Blocked::Barrier;
                self.progress(r);
            }
        }
    }

    fn progress(&mut self, r: usize) {
        let mut out = Vec::new();
        let rank = &mut self.ranks[r];
        let p = rank.barrier.progress(&mut out);
        let sent: Vec<(u32, Msg)> = out
            .into_iter()
            .map(|s| {
                let c = rank.barrier_clocks.outgoing(s.epoch, &rank.entry);
                (s.to, Msg::Barrier(s, c))
            })
            .collect();
        if let Progress::Done { epoch } = p {
            let all = rank.barrier_clocks.finish(epoch, &rank.entry);
            rank.clock.acquire(&all);
            rank.barriers_done += 1;
            // What the real rank does: forget what the barrier before
            // ordered (the reports must not change for it).
            if let Some(before) = rank.detector.barrier_passed(&all) {
                rank.cells.forget_ordered_before(&before);
            }
            rank.blocked = Blocked::No;
        }
        for (to, m) in sent {
            self.send(r, to, m);
        }
    }

    fn deliver(&mut self, from: u32, to: u32) {
        let Some(msg) = self
            .links
            .get_mut(&(from, to))
            .and_then(VecDeque::pop_front)
        else {
            return;
        };
        let t = to as usize;
        match msg {
            Msg::Access(kind, bytes, op, clock, barrier_epoch, site) => {
                let a = Access {
                    at: Epoch {
                        rank: from,
                        tick: clock.get(from),
                    },
                    kind,
                    op,
                    barrier_epoch,
                    site,
                };
                let start = bytes.start;
                self.record(t, &a, bytes, &clock);
                let reply = kind
                    .atomic()
                    .then(|| self.ranks[t].cells.atomic((DATA, start), &clock))
                    .filter(|_| kind != AccessKind::AtomicAdd);
                self.send(t, from, Msg::Reply(op, reply));
            }
            Msg::Notify(cell, add, value, clock) => {
                let rank = &mut self.ranks[t];
                let v = rank.values.entry(cell).or_insert(0);
                *v = if add { v.wrapping_add(value) } else { value };
                rank.cells.notified((1, cell), add, value, &clock);
            }
            Msg::Reply(op, clock) => {
                let rank = &mut self.ranks[t];
                assert_eq!(
                    rank.blocked,
                    Blocked::Reply(op),
                    "a reply to an op not awaited"
                );
                if let Some(c) = clock {
                    rank.clock.acquire(&c);
                }
                rank.blocked = Blocked::No;
            }
            Msg::Barrier(signal, clock) => {
                let rank = &mut self.ranks[t];
                rank.barrier_clocks.heard(signal.epoch, &clock);
                rank.barrier
                    .on_message(from, signal.epoch, signal.round)
                    .expect("a well-formed barrier signal");
                if rank.blocked == Blocked::Barrier {
                    self.progress(t);
                }
            }
        }
    }
}
