//! Vector clocks and the per-rank clock discipline of checked mode.

use std::fmt;

/// One component per rank: how many of that rank's release points are
/// known to have happened.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct VectorClock(Vec<u64>);

impl VectorClock {
    /// The zero clock of `n` ranks.
    pub fn zero(n: u32) -> VectorClock {
        VectorClock(vec![0; n as usize])
    }

    /// A clock from its wire form (one component per rank, in rank order).
    pub fn from_wire(components: Vec<u64>) -> VectorClock {
        VectorClock(components)
    }

    /// The wire form.
    pub fn as_wire(&self) -> &[u64] {
        &self.0
    }

    /// Rank `rank`'s component (0 for a rank beyond the clock's length).
    pub fn get(&self, rank: u32) -> u64 {
        self.0.get(rank as usize).copied().unwrap_or(0)
    }

    /// Raises every component to at least `other`'s.
    pub fn join(&mut self, other: &VectorClock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// Advances rank `rank`'s own component by one.
    pub fn tick(&mut self, rank: u32) {
        let i = rank as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] += 1;
    }

    /// Whether every component is at most `other`'s.
    pub fn le(&self, other: &VectorClock) -> bool {
        self.0
            .iter()
            .enumerate()
            .all(|(i, c)| *c <= other.get(i as u32))
    }
}

impl fmt::Display for VectorClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, c) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, " ")?;
            }
            write!(f, "{c}")?;
        }
        write!(f, "]")
    }
}

/// A rank's position in its own history: its component at an access.
/// `e` happens before a clock `c` exactly when `e.tick <= c[e.rank]` (the
/// FastTrack epoch), so an access is kept as an epoch, not a whole clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Epoch {
    /// The rank.
    pub rank: u32,
    /// Its own component at the time.
    pub tick: u64,
}

impl Epoch {
    /// Whether this point is ordered before everything `clock` has seen.
    pub fn happens_before(self, clock: &VectorClock) -> bool {
        self.tick <= clock.get(self.rank)
    }
}

/// One rank's clock. Accesses are stamped with the current epoch; at each
/// release point (a notify, a barrier entry, an atomic) the rank sends its
/// clock and then advances its own component, so that what it does after
/// the release is not ordered by it; at each acquire (a wait that passes,
/// a barrier's end, an atomic's reply) it joins what it received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankClock {
    rank: u32,
    clock: VectorClock,
}

impl RankClock {
    /// Rank `rank` of `n`, before anything happened: its own component is
    /// 1, so that its first accesses are ordered before nobody else's.
    pub fn new(rank: u32, n: u32) -> RankClock {
        let mut clock = VectorClock::zero(n);
        clock.tick(rank);
        RankClock { rank, clock }
    }

    /// The rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The current clock (what a message sent now carries).
    pub fn clock(&self) -> &VectorClock {
        &self.clock
    }

    /// The epoch an access made now is stamped with.
    pub fn epoch(&self) -> Epoch {
        Epoch {
            rank: self.rank,
            tick: self.clock.get(self.rank),
        }
    }

    /// A release point: returns the clock to send, then advances.
    pub fn release(&mut self) -> VectorClock {
        let sent = self.clock.clone();
        self.clock.tick(self.rank);
        sent
    }

    /// An acquire: everything `seen` has seen happens before what this
    /// rank does next.
    pub fn acquire(&mut self, seen: &VectorClock) {
        self.clock.join(seen);
    }
}
