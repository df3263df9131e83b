//! What a rank knows of its peers' runs, with one owner: the epoch each
//! peer last showed, the rejoins pending (a peer restarted and its new run
//! is being dialed), the queue of the rank's rejoin task, and the first
//! peer refused for disagreeing on the cluster's identity.
//!
//! The handshake reports every Hello it accepts ([`Members::joined`]) and
//! every refusal; ops consult [`Members::rejoining`] on their way out;
//! `rank::links` runs the rejoins.

use pld_proto::lock::Locked;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// A peer refused at the handshake.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub peer: u32,
    pub addr: String,
    pub mismatch: pld_proto::handshake::Mismatch,
}

/// What a rank knows of its peers' runs; see the module's docs.
#[derive(Debug)]
pub(crate) struct Members {
    /// The epoch each peer last showed (0: not seen yet).
    epochs: Mutex<Vec<u64>>,
    /// Peers whose new run is being dialed.
    /// Read by every op (`Rank::target`): an atomic, not a lock.
    pending: Vec<AtomicBool>,
    done: Notify,
    tx: UnboundedSender<u32>,
    /// Taken by the rank's rejoin task.
    rx: Mutex<Option<UnboundedReceiver<u32>>>,
    /// The first peer this rank refused for disagreeing on the cluster's
    /// identity; a rank that is still starting fails with it.
    refusal: Mutex<Option<Refusal>>,
    refused: Notify,
}

impl Members {
    pub fn new(nranks: usize) -> Members {
        let (tx, rx) = unbounded_channel();
        Members {
            epochs: Mutex::new(vec![0; nranks]),
            pending: (0..nranks).map(|_| AtomicBool::default()).collect(),
            done: Notify::new(),
            tx,
            rx: Mutex::new(Some(rx)),
            refusal: Mutex::new(None),
            refused: Notify::new(),
        }
    }

    /// Peer `peer` showed run `epoch` in a Hello that passed the checks
    /// (`rank` is this rank, for the log). If it had shown another run
    /// before, it restarted; if the Hello was `accepted` (it dialed this
    /// rank), a rejoin is marked pending and queued before this rank
    /// answers it — a dial of this rank's own replaces the link itself.
    pub fn joined(&self, rank: u32, peer: u32, epoch: u64, accepted: bool) {
        let r = peer as usize;
        let old = {
            let mut epochs = self.epochs.locked();
            match epochs.get_mut(r) {
                Some(e) => std::mem::replace(e, epoch),
                None => return,
            }
        };
        if old != 0 && old != epoch {
            tracing::warn!(rank, peer, "rank {peer} restarted (epoch {old} -> {epoch})");
            if accepted {
                self.pending[r].store(true, Ordering::Release);
                let _ = self.tx.send(peer);
            }
        }
    }

    /// The epoch of `peer`'s run this rank last saw in a Hello (0: none yet).
    pub fn known_epoch(&self, peer: u32) -> Option<u64> {
        self.epochs.locked().get(peer as usize).copied()
    }

    /// The queue of peers to rejoin, for the rank's rejoin task (once).
    pub fn take_rejoins(&self) -> Option<UnboundedReceiver<u32>> {
        self.rx.locked().take()
    }

    /// The rejoin of `peer` ended (its new link is in place, or dialing it
    /// failed).
    pub fn rejoin_done(&self, peer: u32) {
        if let Some(p) = self.pending.get(peer as usize) {
            p.store(false, Ordering::Release);
        }
        self.done.notify_waiters();
    }

    /// Waits until no rejoin of `peer` is pending, or `deadline`.
    pub async fn rejoined(&self, peer: u32, deadline: tokio::time::Instant) {
        loop {
            let done = self.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if !self.rejoining(peer) {
                return;
            }
            if tokio::time::timeout_at(deadline, done).await.is_err() {
                return;
            }
        }
    }

    /// Whether a rejoin of `peer` is pending.
    pub fn rejoining(&self, peer: u32) -> bool {
        self.pending
            .get(peer as usize)
            .is_some_and(|p| p.load(Ordering::Acquire))
    }

    /// Records a peer refused at the handshake (the first one counts).
    pub fn record_refusal(&self, r: Refusal) {
        let mut slot = self.refusal.locked();
        if slot.is_none() {
            *slot = Some(r);
            self.refused.notify_waiters();
        }
    }

    /// Resolves with the first refusal (at once if there was one already).
    pub async fn refusal(&self) -> Refusal {
        loop {
            let notified = self.refused.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = self.refusal.locked().clone() {
                return r;
            }
            notified.await;
        }
    }
}
