//! Checked mode: a happens-before race detector for one-sided programs.
//!
//! Every rank keeps a vector clock ([`RankClock`]). The messages that order
//! things carry the sender's clock: a notify (the signal cell keeps the
//! join of its notifies' clocks; a wait that passes acquires it), the
//! barrier's dissemination signals (after a barrier every rank holds the
//! join of all ranks' clocks at entry), the atomics (the cell keeps a
//! clock; a fetching atomic's reply carries it), and every access a peer
//! makes to a window (the target checks it against its shadow). Rules for
//! the cells and the barrier are in [`sync`].
//!
//! The target keeps, per window, a [`Shadow`]: per byte range, the last
//! write and the reads since, each as an epoch (rank, its own component at
//! the access) — so checking an access against an earlier one is one
//! comparison, `earlier.tick <= clock[earlier.rank]`. Two accesses race
//! when they overlap, at least one writes, they are not atomics of one
//! family, they come from different ranks (one rank's accesses to one
//! window are ordered: its ops to a target apply in issue order), and the
//! earlier does not happen before the later. Whichever of the two reaches
//! the window first, the same [`Race`] is reported: detection depends on
//! the program's synchronisation, not on when the bytes arrived.
//!
//! Cost: a message carries one u64 per rank; an access costs a range
//! lookup in a `BTreeMap` plus one comparison per earlier access kept for
//! the range (at most the write and one read per rank). Nothing here when
//! checked mode is off: the driver holds no [`Detector`].

mod access;
mod clock;
mod race;
mod shadow;
pub mod sync;

#[cfg(test)]
mod harness;
#[cfg(test)]
mod tests;

pub use access::{Access, AccessKind};
pub use clock::{Epoch, RankClock, VectorClock};
pub use race::{Race, RaceKey};
pub use shadow::{DEFAULT_MAX_RANGES, Shadow};

use std::collections::HashSet;
use std::ops::Range;

/// One rank's detector: the shadows of its windows and the reports it
/// already made (each reported once, by [`Race::key`]).
#[derive(Debug, Clone)]
pub struct Detector {
    shadows: Vec<Shadow>,
    reported: HashSet<RaceKey>,
    races: u64,
    /// The clock the last barrier ended with (everyone's at its entry).
    last_barrier: Option<VectorClock>,
}

impl Detector {
    /// The detector of rank `owner`, whose windows are named `windows` (in
    /// window-index order).
    pub fn new<S: AsRef<str>>(owner: u32, windows: &[S]) -> Detector {
        Detector::with_budget(owner, windows, DEFAULT_MAX_RANGES)
    }

    /// As [`Detector::new`], each window's shadow keeping at most
    /// `max_ranges` ranges.
    pub fn with_budget<S: AsRef<str>>(owner: u32, windows: &[S], max_ranges: usize) -> Detector {
        Detector {
            shadows: windows
                .iter()
                .map(|w| Shadow::with_budget(owner, w.as_ref(), max_ranges))
                .collect(),
            reported: HashSet::new(),
            races: 0,
            last_barrier: None,
        }
    }

    /// A barrier ended on this rank with `all`, the join of every rank's
    /// clock at its entry. Every rank's clock now holds the *previous*
    /// barrier's join — every rank left that barrier before entering this
    /// one — so no access yet to come, from any rank, can race with one
    /// that happens before it: those are forgotten. (Not this barrier's
    /// join: a rank still in it may have an access in flight that it
    /// issued before leaving.) Returns the clock forgotten before, for the
    /// cells to forget by too.
    pub fn barrier_passed(&mut self, all: &VectorClock) -> Option<VectorClock> {
        let before = self.last_barrier.replace(all.clone())?;
        for s in &mut self.shadows {
            s.forget_ordered_before(&before);
        }
        Some(before)
    }

    /// The shadows' windows and how many ranges each forgot over its
    /// budget so far.
    pub fn forgotten(&self) -> impl Iterator<Item = (&str, u64)> {
        self.shadows.iter().map(|s| (s.window(), s.forgotten()))
    }

    /// Records `access` to `bytes` of window `window`, made by a rank whose
    /// clock was `clock`; returns the races not reported before. An unknown
    /// window records nothing (the access itself is refused elsewhere).
    pub fn access(
        &mut self,
        window: u32,
        bytes: Range<u64>,
        access: &Access,
        clock: &VectorClock,
    ) -> Vec<Race> {
        let Some(shadow) = self.shadows.get_mut(window as usize) else {
            return Vec::new();
        };
        let mut fresh = Vec::new();
        for race in shadow.access(bytes, access, clock) {
            self.races += 1;
            if self.reported.insert(race.key()) {
                fresh.push(race);
            }
        }
        fresh
    }

    /// As [`Detector::access`], but records nothing of the access (strict
    /// mode refuses a racing one): returns whether it races, and the races
    /// not reported before.
    pub fn check(
        &mut self,
        window: u32,
        bytes: Range<u64>,
        access: &Access,
        clock: &VectorClock,
    ) -> (bool, Vec<Race>) {
        let Some(shadow) = self.shadows.get(window as usize) else {
            return (false, Vec::new());
        };
        let all = shadow.conflicts(bytes, access, clock);
        let raced = !all.is_empty();
        let mut fresh = Vec::new();
        for race in all {
            self.races += 1;
            if self.reported.insert(race.key()) {
                fresh.push(race);
            }
        }
        (raced, fresh)
    }

    /// Races seen so far, repeats included (the `races` counter).
    pub fn races(&self) -> u64 {
        self.races
    }

    /// Ranges the shadows keep in all (their cost).
    pub fn ranges(&self) -> usize {
        self.shadows.iter().map(Shadow::ranges).sum()
    }

    /// The name of window `window`.
    pub fn window_name(&self, window: u32) -> Option<&str> {
        self.shadows.get(window as usize).map(Shadow::window)
    }

    /// Ranges forgotten over the budget in all.
    pub fn forgotten_total(&self) -> u64 {
        self.shadows.iter().map(Shadow::forgotten).sum()
    }
}
