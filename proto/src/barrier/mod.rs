//! The dissemination barrier as a pure state machine.
//!
//! P ranks, ⌈log₂P⌉ rounds: in round k rank r signals rank (r + 2^k) mod P
//! and waits for rank (r − 2^k) mod P. After round k a rank has heard,
//! directly or through others, that ranks r−1 … r−(2^(k+1)−1) entered the
//! barrier, so after the last round it has heard from everyone. One barrier
//! sends exactly P·⌈log₂P⌉ messages in all.
//!
//! Messages carry (epoch, round). A rank can receive a message of the next
//! epoch before it has finished the current one (its sender finished
//! first); such messages are kept, never dropped. A barrier that passes its
//! deadline stays pending: the next `enter` resumes it.
//!
//! No sockets, no clock: the driver passes time in, sends what
//! [`Barrier::progress`] asks for, and feeds arriving messages to
//! [`Barrier::on_message`].

use std::fmt;
use std::time::Instant;

/// A barrier message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signal {
    /// The rank to send it to.
    pub to: u32,
    /// The barrier's epoch.
    pub epoch: u64,
    /// The round it belongs to (0-based).
    pub round: u32,
}

/// Where a barrier stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// No barrier is running.
    Idle,
    /// Every rank has arrived at `epoch`; this rank may leave.
    Done {
        /// The epoch that completed.
        epoch: u64,
    },
    /// Waiting for a message.
    Waiting(Missing),
}

/// Where a barrier stands, without the diagnostic: what a driver checks
/// after every message ([`Barrier::advance`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// No barrier is running.
    Idle,
    /// Every rank has arrived at `epoch`; this rank may leave.
    Done {
        /// The epoch that completed.
        epoch: u64,
    },
    /// Waiting for a message ([`Barrier::missing`] says which).
    Waiting,
}

/// What a waiting barrier misses: the material of the diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// This rank.
    pub rank: u32,
    /// The barrier's epoch.
    pub epoch: u64,
    /// The round whose message has not arrived (0-based).
    pub round: u32,
    /// How many rounds the barrier takes: ⌈log2 N⌉.
    pub rounds: u32,
    /// The rank that must send this round's message.
    pub waiting_for: u32,
    /// Ranks whose arrival this rank has not heard of, even indirectly.
    pub not_heard_from: Vec<u32>,
    /// When this rank entered the barrier.
    pub entered_at: Instant,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "barrier epoch {} on rank {}: waiting in round {} of {} for rank {}; no word yet from rank{} {}",
            self.epoch,
            self.rank,
            self.round + 1,
            self.rounds,
            self.waiting_for,
            if self.not_heard_from.len() == 1 {
                ""
            } else {
                "s"
            },
            join(&self.not_heard_from)
        )
    }
}

/// Ranks as `1, 2, 5`.
pub fn join(ranks: &[u32]) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A barrier message that cannot be right. The message is ignored; the
/// barrier's state does not change.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BarrierError {
    /// A round beyond the last.
    #[error(
        "barrier message for round {round} from rank {from}, but a barrier of {nranks} ranks has {rounds} rounds"
    )]
    NoSuchRound {
        from: u32,
        round: u32,
        rounds: u32,
        nranks: u32,
    },
    /// The sender is not the one that signals this rank in that round.
    #[error(
        "barrier message for round {round} from rank {from}, but in that round rank {expected} signals this rank"
    )]
    WrongSender {
        from: u32,
        round: u32,
        expected: u32,
    },
    /// An (epoch, round) already received or already finished.
    #[error(
        "barrier message from rank {from} for epoch {epoch} round {round} arrived twice or after its barrier finished"
    )]
    Duplicate { from: u32, epoch: u64, round: u32 },
    /// An epoch further ahead than any rank can be.
    #[error(
        "barrier message from rank {from} for epoch {epoch}, but this rank is at epoch {current}"
    )]
    TooFarAhead { from: u32, epoch: u64, current: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Running {
    epoch: u64,
    round: u32,
    /// Whether this round's signal has been emitted.
    sent: bool,
    entered_at: Instant,
}

/// One rank's dissemination barrier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Barrier {
    rank: u32,
    nranks: u32,
    rounds: u32,
    /// Epochs are numbered from 1; this is the one `enter` starts next.
    next_epoch: u64,
    running: Option<Running>,
    /// Messages received and not yet consumed: (epoch, round), sorted.
    /// They span at most two epochs (see `on_message`), so a short vector
    /// that keeps its capacity holds them: no allocation per message.
    arrived: Vec<(u64, u32)>,
    /// Whether `enter` was ever called (an epoch is adopted only before).
    entered: bool,
}

/// The rank that signals `rank` of `nranks` in `round`: (rank − 2^round) mod P.
pub fn signaller(rank: u32, nranks: u32, round: u32) -> u32 {
    let p = nranks as u64;
    ((rank as u64 + p - (1u64 << round) % p) % p) as u32
}

/// ⌈log₂ P⌉: the number of rounds of a barrier of `nranks` ranks.
pub fn rounds(nranks: u32) -> u32 {
    if nranks <= 1 {
        0
    } else {
        32 - (nranks - 1).leading_zeros()
    }
}

impl Barrier {
    /// The barrier of `rank` among `nranks` ranks.
    pub fn new(rank: u32, nranks: u32) -> Self {
        Barrier {
            rank,
            nranks,
            rounds: rounds(nranks),
            next_epoch: 1,
            running: None,
            arrived: Vec::with_capacity(2 * rounds(nranks) as usize),
            entered: false,
        }
    }

    /// Joins the barriers where the peers are: a rank that restarted while
    /// the others ran `epoch - 1` barriers starts at `epoch`. Only before its
    /// first `enter`, and only forward; messages of earlier epochs are
    /// dropped. Returns whether the epoch moved.
    pub fn adopt(&mut self, epoch: u64) -> bool {
        if self.entered || epoch <= self.next_epoch {
            return false;
        }
        self.next_epoch = epoch;
        self.arrived.retain(|(e, _)| *e >= epoch);
        true
    }

    /// The rank this rank signals in `round`.
    pub fn signals(&self, round: u32) -> u32 {
        ((self.rank as u64 + (1u64 << round)) % self.nranks as u64) as u32
    }

    /// The rank that signals this rank in `round`.
    pub fn signalled_by(&self, round: u32) -> u32 {
        signaller(self.rank, self.nranks, round)
    }

    /// The signals of the running barrier already sent to `peer`: what a
    /// peer that restarted (and lost them) must be sent again.
    pub fn sent_to(&self, peer: u32) -> Vec<Signal> {
        let Some(run) = &self.running else {
            return Vec::new();
        };
        (0..self.rounds)
            .filter(|&r| r < run.round || (r == run.round && run.sent))
            .filter(|&r| self.signals(r) == peer)
            .map(|round| Signal {
                to: peer,
                epoch: run.epoch,
                round,
            })
            .collect()
    }

    /// Whether a barrier is running (entered and not yet completed).
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The epoch running now, or the one `enter` will start.
    pub fn epoch(&self) -> u64 {
        self.running.as_ref().map_or(self.next_epoch, |r| r.epoch)
    }

    /// Enters the next barrier — or resumes the one that timed out — and
    /// returns its epoch. Call [`Barrier::progress`] next.
    pub fn enter(&mut self, now: Instant) -> u64 {
        if let Some(r) = &self.running {
            return r.epoch;
        }
        self.entered = true;
        let epoch = self.next_epoch;
        self.next_epoch += 1;
        self.running = Some(Running {
            epoch,
            round: 0,
            sent: false,
            entered_at: now,
        });
        epoch
    }

    /// Records a message from `from`.
    pub fn on_message(&mut self, from: u32, epoch: u64, round: u32) -> Result<(), BarrierError> {
        if round >= self.rounds {
            return Err(BarrierError::NoSuchRound {
                from,
                round,
                rounds: self.rounds,
                nranks: self.nranks,
            });
        }
        let expected = self.signalled_by(round);
        if from != expected {
            return Err(BarrierError::WrongSender {
                from,
                round,
                expected,
            });
        }
        // Every message of an epoch before the current one, and of the
        // current one before its current round, has been consumed.
        let current = self.epoch();
        let consumed = match &self.running {
            Some(r) => epoch < r.epoch || (epoch == r.epoch && round < r.round),
            None => epoch < self.next_epoch,
        };
        let at = match self.arrived.binary_search(&(epoch, round)) {
            Err(at) if !consumed => at,
            _ => return Err(BarrierError::Duplicate { from, epoch, round }),
        };
        // No rank can finish epoch e before this rank entered it, so no
        // message can be more than one epoch ahead of this rank.
        if epoch > current + 1 {
            return Err(BarrierError::TooFarAhead {
                from,
                epoch,
                current,
            });
        }
        self.arrived.insert(at, (epoch, round));
        Ok(())
    }

    /// Advances as far as the messages received allow, appending the
    /// signals to send to `out`; waiting, says what is missing.
    pub fn progress(&mut self, out: &mut Vec<Signal>) -> Progress {
        match self.advance(out) {
            Advance::Idle => Progress::Idle,
            Advance::Done { epoch } => Progress::Done { epoch },
            Advance::Waiting => self.missing().map_or(Progress::Idle, Progress::Waiting),
        }
    }

    /// [`Barrier::progress`] without building the diagnostic: what a driver
    /// calls after every message, asking [`Barrier::missing`] only at its
    /// deadline.
    pub fn advance(&mut self, out: &mut Vec<Signal>) -> Advance {
        loop {
            let Some(run) = &mut self.running else {
                return Advance::Idle;
            };
            if run.round == self.rounds {
                let epoch = run.epoch;
                self.running = None;
                return Advance::Done { epoch };
            }
            if !run.sent {
                out.push(Signal {
                    to: ((self.rank as u64 + (1u64 << run.round)) % self.nranks as u64) as u32,
                    epoch: run.epoch,
                    round: run.round,
                });
                run.sent = true;
            }
            match self.arrived.binary_search(&(run.epoch, run.round)) {
                Ok(at) => {
                    self.arrived.remove(at);
                    run.round += 1;
                    run.sent = false;
                }
                Err(_) => return Advance::Waiting,
            }
        }
    }

    /// What the running barrier waits for; `None` when none runs.
    pub fn missing(&self) -> Option<Missing> {
        let run = self.running.as_ref()?;
        Some(self.missing_at(run.epoch, run.round, run.entered_at))
    }

    fn missing_at(&self, epoch: u64, round: u32, entered_at: Instant) -> Missing {
        // Before round `round` completes, this rank has heard from ranks
        // r-1 … r-(2^round - 1); everyone else is still unaccounted for.
        let p = self.nranks as u64;
        let heard = (1u64 << round).min(p);
        let mut not_heard_from: Vec<u32> = (heard..p)
            .map(|j| ((self.rank as u64 + p - j) % p) as u32)
            .collect();
        not_heard_from.sort_unstable();
        Missing {
            rank: self.rank,
            epoch,
            round,
            rounds: self.rounds,
            waiting_for: self.signalled_by(round),
            not_heard_from,
            entered_at,
        }
    }
}

#[cfg(test)]
pub(crate) mod harness;
#[cfg(test)]
mod tests;
