//! An in-memory network of barrier state machines that can delay, reorder
//! and drop messages and cut links, in the style of raft-rs's test harness.

use super::{Barrier, Progress, Signal};
use std::collections::HashSet;
use std::time::Instant;

/// A small deterministic generator (xorshift64*), so that every failure
/// names a seed that reproduces it.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// What determines a network's future: the barriers, the messages in
/// flight (as a sorted list: from, to, epoch, round), barriers left to run
/// and who is inside one.
pub type StateKey = (Vec<Barrier>, Vec<(u32, u32, u64, u32)>, Vec<u64>, Vec<bool>);

/// One possible next event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Rank enters its next barrier.
    Enter(u32),
    /// The in-flight message at this index arrives.
    Deliver(usize),
}

/// P ranks and the messages between them.
#[derive(Debug, Clone)]
pub struct Network {
    pub ranks: Vec<Barrier>,
    /// Messages sent and not yet delivered: (from, signal).
    pub in_flight: Vec<(u32, Signal)>,
    /// Links (from, to) that lose everything sent on them.
    pub cut: HashSet<(u32, u32)>,
    /// Barriers each rank still has to run.
    pub to_run: Vec<u64>,
    /// Whether each rank is inside a barrier.
    pub inside: Vec<bool>,
    /// Highest epoch each rank has entered.
    pub entered: Vec<u64>,
    /// Epochs each rank completed, in order.
    pub completed: Vec<Vec<u64>>,
    /// Messages sent per rank.
    pub sent: Vec<u64>,
    pub now: Instant,
}

impl Network {
    pub fn new(p: u32, epochs: u64) -> Self {
        Network {
            ranks: (0..p).map(|r| Barrier::new(r, p)).collect(),
            in_flight: Vec::new(),
            cut: HashSet::new(),
            to_run: vec![epochs; p as usize],
            inside: vec![false; p as usize],
            entered: vec![0; p as usize],
            completed: vec![Vec::new(); p as usize],
            sent: vec![0; p as usize],
            now: Instant::now(),
        }
    }

    /// Every event that could happen next.
    pub fn events(&self) -> Vec<Event> {
        let mut ev: Vec<Event> = (0..self.ranks.len())
            .filter(|&r| !self.inside[r] && self.to_run[r] > 0)
            .map(|r| Event::Enter(r as u32))
            .collect();
        ev.extend((0..self.in_flight.len()).map(Event::Deliver));
        ev
    }

    fn advance(&mut self, r: usize) {
        let mut out = Vec::new();
        let progress = self.ranks[r].progress(&mut out);
        for s in out {
            self.sent[r] += 1;
            if !self.cut.contains(&(r as u32, s.to)) {
                self.in_flight.push((r as u32, s));
            }
        }
        if let Progress::Done { epoch } = progress {
            // The barrier's one rule: nobody leaves epoch e before every
            // rank has entered it.
            for (q, &e) in self.entered.iter().enumerate() {
                assert!(
                    e >= epoch,
                    "rank {r} left epoch {epoch} before rank {q} entered it (rank {q} is at {e})"
                );
            }
            self.completed[r].push(epoch);
            self.inside[r] = false;
        }
    }

    /// Makes `event` happen. With `drop_percent`, a delivered message may be
    /// lost instead.
    pub fn step(&mut self, event: Event, lose: bool) {
        match event {
            Event::Enter(r) => {
                let r = r as usize;
                let epoch = self.ranks[r].enter(self.now);
                self.entered[r] = epoch;
                self.inside[r] = true;
                self.to_run[r] -= 1;
                self.advance(r);
            }
            Event::Deliver(i) => {
                let (from, s) = self.in_flight.swap_remove(i);
                if lose {
                    return;
                }
                let to = s.to as usize;
                self.ranks[to]
                    .on_message(from, s.epoch, s.round)
                    .unwrap_or_else(|e| panic!("a correct peer's message was refused: {e}"));
                if self.inside[to] {
                    self.advance(to);
                }
            }
        }
    }

    /// Runs random events until none is left; `drop_percent` of deliveries
    /// are lost.
    pub fn run_random(&mut self, rng: &mut Rng, drop_percent: usize) {
        loop {
            let ev = self.events();
            if ev.is_empty() {
                return;
            }
            let e = ev[rng.below(ev.len())];
            let lose = matches!(e, Event::Deliver(_)) && rng.chance(drop_percent);
            self.step(e, lose);
        }
    }

    /// A key of the state that matters for exploration.
    pub fn key(&self) -> StateKey {
        let mut msgs: Vec<(u32, u32, u64, u32)> = self
            .in_flight
            .iter()
            .map(|(f, s)| (*f, s.to, s.epoch, s.round))
            .collect();
        msgs.sort_unstable();
        (
            self.ranks.clone(),
            msgs,
            self.to_run.clone(),
            self.inside.clone(),
        )
    }
}
