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
pub use shadow::Shadow;

use std::collections::HashSet;
use std::ops::Range;

/// One rank's detector: the shadows of its windows and the reports it
/// already made (each reported once, by [`Race::key`]).
#[derive(Debug, Clone)]
pub struct Detector {
    shadows: Vec<Shadow>,
    reported: HashSet<RaceKey>,
    races: u64,
}

impl Detector {
    /// The detector of rank `owner`, whose windows are named `windows` (in
    /// window-index order).
    pub fn new<S: AsRef<str>>(owner: u32, windows: &[S]) -> Detector {
        Detector {
            shadows: windows
                .iter()
                .map(|w| Shadow::new(owner, w.as_ref()))
                .collect(),
            reported: HashSet::new(),
            races: 0,
        }
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
}
