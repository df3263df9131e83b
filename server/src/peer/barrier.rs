//! The barrier's driver state, with one owner: the dissemination state
//! machine (`pld_proto::barrier`), the wake-up of the task that drives it,
//! the signals it handed out that could not be sent, and the served
//! connections of lower-ranked peers that carry this rank's signals to
//! them (see `peer::signal`).
//!
//! Serve tasks and link readers feed it what they hear ([`BarrierState::heard`]);
//! `Rank::barrier` (`rank/sync.rs`) drives it ([`BarrierState::step`]);
//! the handshake asks it for the epoch to show and adopts the cluster's.
//! The frame of a signal is built here, once, for both ways it can leave.

use crate::checked::Checked;
use crate::ratelog::RateLimited;
use crate::stats::Stats;
use pld_proto::barrier::{Advance, Barrier, Missing, Signal};
use pld_proto::lock::Locked;
use pld_proto::v1::{BarrierSignal, CheckedStamp, Header, header::Body};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio::sync::futures::Notified;

use super::served::ServedWriter;
use std::sync::Arc;

/// The barrier's driver state; see the module's docs.
#[derive(Debug)]
pub(crate) struct BarrierState {
    /// The dissemination barrier; fed by serve tasks, driven by `Rank::barrier`.
    machine: Mutex<Barrier>,
    /// Wakes `Rank::barrier` when a barrier message arrives.
    wake: Notify,
    /// The log line of a barrier message that was ignored: a peer (or,
    /// under --insecure, anyone) can send many.
    ignored: RateLimited,
    /// Signals the state machine handed out that could not be sent: the
    /// next step sends them first, or fails again.
    unsent: Mutex<Vec<Signal>>,
    /// The served connections of lower-ranked peers: where this rank sends
    /// them its signals.
    served: Served,
}

impl BarrierState {
    pub fn new(rank: u32, nranks: u32) -> BarrierState {
        BarrierState {
            machine: Mutex::new(Barrier::new(rank, nranks)),
            wake: Notify::new(),
            ignored: RateLimited::every(Duration::from_secs(1)),
            unsent: Mutex::new(Vec::new()),
            served: Served::new(nranks as usize),
        }
    }

    /// The epoch of the barrier this rank is in, or will enter next.
    pub fn epoch(&self) -> u64 {
        self.machine.locked().epoch()
    }

    /// Joins the barriers at `epoch` if this rank has run none yet (it
    /// restarted and a peer shows where the cluster is); whether it did.
    pub fn adopt(&self, epoch: u64) -> bool {
        self.machine.locked().adopt(epoch)
    }

    /// Makes `w` the connection to signal `peer` on; whether it follows an
    /// earlier one, which may have taken signals with it when it went (the
    /// caller then has them sent again: [`BarrierState::resend_to`]).
    pub fn register_served(&self, peer: u32, w: &Arc<ServedWriter>) -> bool {
        self.served.register(peer, w)
    }

    /// Forgets `w` (a connection that ended), unless a newer one of the
    /// peer has taken its place.
    pub fn deregister_served(&self, peer: u32, w: &Arc<ServedWriter>) {
        self.served.deregister(peer, w);
    }

    /// The served connection to signal `peer` on, if there is one.
    pub fn served_to(&self, peer: u32) -> Option<Arc<ServedWriter>> {
        self.served.get(peer)
    }

    /// Enters the next barrier at `now` (or resumes the one that is
    /// pending); in checked mode a new barrier records this rank's entry.
    pub fn enter(&self, now: Instant, checked: Option<&Checked>) {
        let mut b = self.machine.locked();
        if !b.is_running()
            && let Some(c) = checked
        {
            c.barrier_enter();
        }
        b.enter(now);
    }

    /// A future that resolves at the next signal heard (or resend queued);
    /// enable it before [`BarrierState::step`], so that nothing heard in
    /// between is missed.
    pub fn woken(&self) -> Notified<'_> {
        self.wake.notified()
    }

    /// One step of the driver: the signals left unsent last time, then
    /// what the state machine hands out now, go into `out` for the caller
    /// to send.
    pub fn step(&self, out: &mut Vec<Signal>) -> Advance {
        out.append(&mut self.unsent.locked());
        self.machine.locked().advance(out)
    }

    /// The last look at the deadline: a step, and what is still missing.
    pub fn last_look(&self, out: &mut Vec<Signal>) -> (Advance, Option<Missing>) {
        let mut b = self.machine.locked();
        (b.advance(out), b.missing())
    }

    /// Keeps `rest`, signals that could not be sent, for the next step.
    pub fn keep_unsent(&self, rest: Vec<Signal>) {
        *self.unsent.locked() = rest;
    }

    /// Queues again, for the driver's next step, the signals the running
    /// barrier already sent to `peer` over a connection that is gone (the
    /// peer ignores those it has), and wakes the driver.
    pub fn resend_to(&self, peer: u32) {
        let again = self.machine.locked().sent_to(peer);
        if !again.is_empty() {
            let mut unsent = self.unsent.locked();
            for s in again {
                if !unsent.contains(&s) {
                    unsent.push(s);
                }
            }
        }
        self.wake.notify_waiters();
    }

    /// A barrier signal heard from `from` (on any connection of that
    /// rank): the state machine takes it, and the driver looks again.
    pub fn heard(
        &self,
        from: u32,
        signal: &BarrierSignal,
        stamp: Option<&CheckedStamp>,
        checked: Option<&Checked>,
        stats: &Stats,
    ) {
        let accepted = {
            let mut barrier = self.machine.locked();
            let accepted = barrier.on_message(from, signal.epoch, signal.round);
            // Its clock only once the state machine took it (an epoch far
            // ahead, a duplicate, a wrong sender are dropped whole), and
            // under the barrier's lock, so that the barrier cannot finish
            // the epoch between the two.
            if accepted.is_ok()
                && let (Some(c), Some(s)) = (checked, stamp)
            {
                c.barrier_heard(signal.epoch, s);
            }
            accepted
        };
        match accepted {
            Ok(()) => self.wake.notify_waiters(),
            Err(e) => {
                stats.frame_error();
                if let Some(more) = self.ignored.admit() {
                    tracing::warn!(peer = from, "ignored a barrier message: {e}{more}");
                }
            }
        }
    }
}

/// The frame of signal `s` (one-way: id 0, no reply), stamped in checked
/// mode with what this rank heard of that barrier: the one header both
/// paths of a signal write (`peer::signal`).
pub(crate) fn signal_header(s: &Signal, checked: Option<&Checked>) -> Header {
    let body = Body::Barrier(BarrierSignal {
        epoch: s.epoch,
        round: s.round,
    });
    Header {
        id: 0,
        checked: checked.map(|c| c.stamp_for(&body)),
        body: Some(body),
    }
}

/// The served connections of lower-ranked peers, by rank: where this rank
/// signals them.
#[derive(Debug)]
struct Served {
    slots: Vec<Mutex<Entry>>,
}

#[derive(Debug, Default)]
struct Entry {
    now: Option<Arc<ServedWriter>>,
    /// Whether the peer had a served connection before this one.
    before: bool,
}

impl Served {
    fn new(nranks: usize) -> Served {
        Served {
            slots: (0..nranks).map(|_| Mutex::default()).collect(),
        }
    }

    /// Makes `w` the connection to signal `peer` on. Whether it follows an
    /// earlier one, which may have taken signals with it when it went.
    fn register(&self, peer: u32, w: &Arc<ServedWriter>) -> bool {
        let Some(s) = self.slots.get(peer as usize) else {
            return false;
        };
        let mut s = s.locked();
        s.now = Some(w.clone());
        std::mem::replace(&mut s.before, true)
    }

    /// Forgets `w` (a connection that ended), unless a newer one of the
    /// peer has taken its place.
    fn deregister(&self, peer: u32, w: &Arc<ServedWriter>) {
        if let Some(s) = self.slots.get(peer as usize) {
            let mut s = s.locked();
            if s.now.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, w)) {
                s.now = None;
            }
        }
    }

    fn get(&self, peer: u32) -> Option<Arc<ServedWriter>> {
        self.slots.get(peer as usize)?.locked().now.clone()
    }
}
