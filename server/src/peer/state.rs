//! What both sides of the peer plane need of the local rank: its
//! configuration, windows and counters, its Hello, the barrier's state,
//! activity for spin progress, and the bookkeeping of peers that restart.

use crate::config::Config;
use crate::stats::Stats;
use crate::window::Windows;
use pld_proto::PROTOCOL_VERSION;
use pld_proto::lock::Locked;
use pld_proto::v1::Hello;

/// What both sides of the peer plane need of the local rank.
#[derive(Debug)]
pub(crate) struct RankState {
    pub config: Config,
    pub windows: Windows,
    pub stats: Stats,
    pub hello: Hello,
    /// The race detector, in checked mode.
    pub checked: Option<std::sync::Arc<crate::checked::Checked>>,
    /// The dissemination barrier; fed by serve tasks, driven by `Rank::barrier`.
    pub barrier: std::sync::Mutex<pld_proto::barrier::Barrier>,
    /// Wakes `Rank::barrier` when a barrier message arrives.
    pub barrier_wake: tokio::sync::Notify,
    /// The log line of a barrier message that was ignored: a peer (or,
    /// under --insecure, anyone) can send many.
    pub barrier_ignored: crate::ratelog::RateLimited,
    /// Barrier signals the state machine handed out that could not be sent:
    /// the next barrier call sends them first, or fails again.
    pub barrier_unsent: std::sync::Mutex<Vec<pld_proto::barrier::Signal>>,
    /// When this rank last sent or received a frame (ns, see `spin`), so
    /// that spin progress knows when to back off.
    pub activity: Activity,
    /// The first peer this rank refused for disagreeing on the cluster's
    /// identity; a rank that is still starting fails with it.
    refusal: std::sync::Mutex<Option<Refusal>>,
    refused: tokio::sync::Notify,
    /// Restarts of peers: their epochs, pending rejoins, and the rank's
    /// rejoin task's queue.
    pub rejoin: Rejoin,
    /// Failed requests no handle waits for (`Rank::put_nbi`), for the next
    /// `quiet`; every link's op table records into it.
    pub implicit: std::sync::Arc<crate::peer::link::implicit::ImplicitFailures>,
    /// The peers sent a request since a `quiet` last found their link idle.
    pub touched: crate::peer::touched::Touched,
    /// The served connections of lower-ranked peers: where this rank sends
    /// them its barrier signals (see `peer::signal`).
    pub served: crate::peer::signal::Served,
}

/// What a rank knows of its peers' runs (see `rank::links`).
#[derive(Debug)]
pub(crate) struct Rejoin {
    /// The epoch each peer last showed (0: not seen yet).
    epochs: std::sync::Mutex<Vec<u64>>,
    /// Peers whose new run is being dialed.
    /// Read by every op (`Rank::target`): an atomic, not a lock.
    pending: Vec<std::sync::atomic::AtomicBool>,
    done: tokio::sync::Notify,
    tx: tokio::sync::mpsc::UnboundedSender<u32>,
    /// Taken by the rank's rejoin task.
    pub rx: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<u32>>>,
}

/// Whether a rank moves frames, and a way to wait for the next one. The
/// data path only bumps a counter; the spinner reads the clock.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    frames: std::sync::atomic::AtomicU64,
    /// Set while the spinner sleeps, so that the next frame wakes it.
    asleep: std::sync::atomic::AtomicBool,
    woke: tokio::sync::Notify,
}

impl Activity {
    /// Records a frame sent or received.
    pub fn touch(&self) {
        self.touch_n(1);
    }

    /// Records `n` frames sent or received at once (none: nothing).
    pub fn touch_n(&self, n: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if n == 0 {
            return;
        }
        self.frames.fetch_add(n, Relaxed);
        if self.asleep.load(Relaxed) && self.asleep.swap(false, Relaxed) {
            self.woke.notify_one();
        }
    }

    /// Keeps the runtime polling while frames moved within `idle`, and
    /// sleeps until the next frame otherwise: the spin progress of
    /// transports whose sockets tokio drives (QUIC). A yielding task makes
    /// the worker poll the reactor before running it again, so the thread
    /// never sleeps while it spins. Oversubscribed, it sleeps after
    /// [`PARK_AFTER`](crate::transport::spin::PARK_AFTER) quiet polls, as a
    /// spinning TCP socket does.
    pub async fn spin(&self, idle: std::time::Duration, oversubscribed: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        let mut seen = self.frames.load(Relaxed);
        let mut since = std::time::Instant::now();
        let (mut polls, mut quiet_polls, mut moved) = (0u32, 0u32, false);
        let park_after = if oversubscribed {
            crate::transport::spin::PARK_AFTER
        } else {
            u32::MAX
        };
        loop {
            polls = polls.wrapping_add(1);
            let now = self.frames.load(Relaxed);
            if now != seen {
                (seen, quiet_polls, moved) = (now, 0, true);
            } else {
                quiet_polls += 1;
                // Nothing moves: let other ranks on these cores run (see
                // transport::spin).
                if quiet_polls >= 32 {
                    std::thread::yield_now();
                }
            }
            // The clock is read once per 64 polls.
            let mut sleep = quiet_polls > park_after;
            if polls % 64 == 0 {
                if moved {
                    (since, moved) = (std::time::Instant::now(), false);
                } else if since.elapsed() >= idle {
                    sleep = true;
                }
            }
            if sleep {
                self.asleep.store(true, Relaxed);
                // A frame between the check and the flag: don't sleep.
                if self.frames.load(Relaxed) == seen {
                    self.woke.notified().await;
                }
                self.asleep.store(false, Relaxed);
                (seen, since) = (self.frames.load(Relaxed), std::time::Instant::now());
                (quiet_polls, moved) = (0, false);
                continue;
            }
            tokio::task::yield_now().await;
        }
    }
}

/// A peer refused at the handshake.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub peer: u32,
    pub addr: String,
    pub mismatch: pld_proto::handshake::Mismatch,
}

impl RankState {
    pub fn new(config: Config, windows: Windows) -> Self {
        // This run's epoch: its start time, so that a restarted rank shows
        // a larger one.
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            .max(1);
        let hello = Hello {
            protocol_version: PROTOCOL_VERSION,
            cluster_id: config.cluster_id.clone(),
            rank: config.rank,
            nranks: config.nranks(),
            windows: windows.specs(),
            max_payload: config.max_payload as u64,
            epoch,
            barrier_epoch: 1,
            listen: config.listen_addr().to_string(),
            checked: config.checked != crate::CheckedMode::Off,
        };
        let names: Vec<String> = hello.windows.iter().map(|w| w.name.clone()).collect();
        let checked =
            crate::checked::Checked::new(config.checked, config.rank, config.nranks(), &names);
        let n = config.nranks() as usize;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let rejoin = Rejoin {
            epochs: std::sync::Mutex::new(vec![0; n]),
            pending: (0..n).map(|_| Default::default()).collect(),
            done: tokio::sync::Notify::new(),
            tx,
            rx: std::sync::Mutex::new(Some(rx)),
        };
        let barrier = pld_proto::barrier::Barrier::new(config.rank, config.nranks());
        RankState {
            config,
            windows,
            stats: Stats::default(),
            hello,
            checked,
            barrier: std::sync::Mutex::new(barrier),
            barrier_wake: tokio::sync::Notify::new(),
            barrier_ignored: crate::ratelog::RateLimited::every(std::time::Duration::from_secs(1)),
            barrier_unsent: std::sync::Mutex::new(Vec::new()),
            activity: Activity::default(),
            refusal: std::sync::Mutex::new(None),
            refused: tokio::sync::Notify::new(),
            rejoin,
            implicit: Default::default(),
            touched: crate::peer::touched::Touched::new(n),
            served: crate::peer::signal::Served::new(n),
        }
    }

    /// Queues again, for the barrier task's next step, the signals the
    /// running barrier already sent to `peer` over a connection that is
    /// gone (the peer ignores those it has), and wakes the barrier task.
    pub fn resend_barrier_signals(&self, peer: u32) {
        let again = self.barrier_lock().sent_to(peer);
        if !again.is_empty() {
            let mut unsent = self.barrier_unsent.locked();
            for s in again {
                if !unsent.contains(&s) {
                    unsent.push(s);
                }
            }
        }
        self.barrier_wake.notify_waiters();
    }

    fn barrier_lock(&self) -> std::sync::MutexGuard<'_, pld_proto::barrier::Barrier> {
        self.barrier.locked()
    }

    /// This rank's Hello as of now (its barrier epoch moves).
    pub fn hello_now(&self) -> Hello {
        Hello {
            barrier_epoch: self.barrier_lock().epoch(),
            ..self.hello.clone()
        }
    }

    /// A peer's Hello passed the checks: note its epoch, and join the
    /// barriers where it is if this rank has run none yet (it restarted).
    /// If `accepted` and the peer shows a new epoch, it restarted: a rejoin
    /// is marked pending and queued before this rank answers it.
    pub fn peer_joined(&self, h: &Hello, accepted: bool) {
        if self.barrier_lock().adopt(h.barrier_epoch) {
            tracing::info!(
                rank = self.config.rank,
                "joining the cluster's barriers at epoch {} (learnt from rank {})",
                h.barrier_epoch,
                h.rank
            );
        }
        let r = h.rank as usize;
        let old = {
            let mut epochs = self.rejoin.epochs.locked();
            std::mem::replace(&mut epochs[r], h.epoch)
        };
        if old != 0 && old != h.epoch {
            tracing::warn!(
                rank = self.config.rank,
                peer = h.rank,
                "rank {} restarted (epoch {old} -> {})",
                h.rank,
                h.epoch
            );
            // A dial (this rank's own reconnect) replaces the link itself.
            if accepted {
                self.rejoin.pending[r].store(true, std::sync::atomic::Ordering::Release);
                let _ = self.rejoin.tx.send(h.rank);
            }
        }
    }

    /// The epoch of `peer`'s run this rank last saw in a Hello (0: none yet).
    pub fn known_epoch(&self, peer: u32) -> Option<u64> {
        let epochs = self.rejoin.epochs.locked();
        epochs.get(peer as usize).copied()
    }

    /// The rejoin of `peer` ended (its new link is in place, or dialing it
    /// failed).
    pub fn rejoin_done(&self, peer: u32) {
        if let Some(p) = self.rejoin.pending.get(peer as usize) {
            p.store(false, std::sync::atomic::Ordering::Release);
        }
        self.rejoin.done.notify_waiters();
    }

    /// Waits until no rejoin of `peer` is pending, or `deadline`.
    pub async fn rejoined(&self, peer: u32, deadline: tokio::time::Instant) {
        loop {
            let done = self.rejoin.done.notified();
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
        self.rejoin
            .pending
            .get(peer as usize)
            .is_some_and(|p| p.load(std::sync::atomic::Ordering::Acquire))
    }

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
