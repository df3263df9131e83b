//! What both sides of the peer plane need of the local rank, each part
//! with its owner: the configuration and windows, the counters, the Hello,
//! the race detector, the barrier's driver state ([`BarrierState`]), what
//! the rank knows of its peers' runs ([`Members`]), spin activity, the
//! failures of requests no handle waits for, and which links a `quiet`
//! must look at. Every field is private; each part's rules are its
//! owner's methods.

use super::activity::Activity;
use super::barrier::BarrierState;
use super::link::implicit::ImplicitFailures;
use super::members::Members;
use super::touched::Touched;
use crate::checked::Checked;
use crate::config::Config;
use crate::stats::Stats;
use crate::trace::Trace;
use crate::window::Windows;
use pld_proto::PROTOCOL_VERSION;
use pld_proto::v1::{BarrierSignal, CheckedStamp, Hello};
use std::sync::Arc;

/// What both sides of the peer plane need of the local rank.
#[derive(Debug)]
pub(crate) struct RankState {
    config: Config,
    windows: Windows,
    stats: Stats,
    /// This rank's Hello as it starts (its barrier epoch then moves).
    hello: Hello,
    /// The race detector, in checked mode.
    checked: Option<Arc<Checked>>,
    /// The timeline, with `--trace`.
    trace: Option<Arc<Trace>>,
    barrier: BarrierState,
    members: Members,
    /// When this rank last sent or received a frame, for spin progress.
    activity: Activity,
    /// Failed requests no handle waits for (`Rank::put_nbi`), for the next
    /// `quiet`; every link's op table records into it.
    implicit: Arc<ImplicitFailures>,
    /// The peers sent a request since a `quiet` last found their link idle.
    touched: Touched,
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
        let trace = config.trace.then(|| Arc::new(Trace::new(config.rank)));
        let checked = Checked::new(
            config.checked,
            config.rank,
            config.nranks(),
            &names,
            trace.clone(),
        );
        let n = config.nranks();
        RankState {
            barrier: BarrierState::new(config.rank, n),
            members: Members::new(n as usize),
            touched: Touched::new(n as usize),
            config,
            windows,
            stats: Stats::default(),
            hello,
            checked,
            trace,
            activity: Activity::default(),
            implicit: Default::default(),
        }
    }

    /// The configuration the rank runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The rank's windows.
    pub fn windows(&self) -> &Windows {
        &self.windows
    }

    /// The rank's counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The race detector, in checked mode.
    pub fn checked(&self) -> Option<&Arc<Checked>> {
        self.checked.as_ref()
    }

    /// The timeline, with `--trace`.
    #[inline(always)]
    pub fn trace(&self) -> Option<&Arc<Trace>> {
        self.trace.as_ref()
    }

    /// The barrier's driver state.
    pub fn barrier(&self) -> &BarrierState {
        &self.barrier
    }

    /// What the rank knows of its peers' runs.
    pub fn members(&self) -> &Members {
        &self.members
    }

    /// Frames moving, for spin progress.
    pub fn activity(&self) -> &Activity {
        &self.activity
    }

    /// Failures of requests no handle waits for.
    pub fn implicit(&self) -> &Arc<ImplicitFailures> {
        &self.implicit
    }

    /// Which links a `quiet` must look at.
    pub fn touched(&self) -> &Touched {
        &self.touched
    }

    /// This rank's Hello as it started, for the handshake's checks.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// This run's epoch (its start time in ns).
    pub fn epoch(&self) -> u64 {
        self.hello.epoch
    }

    /// This rank's Hello as of now (its barrier epoch moves).
    pub fn hello_now(&self) -> Hello {
        Hello {
            barrier_epoch: self.barrier.epoch(),
            ..self.hello.clone()
        }
    }

    /// A barrier signal heard from `from` (on any connection of that
    /// rank): the barrier's state takes it, and its driver looks again.
    pub fn heard_signal(&self, from: u32, signal: &BarrierSignal, stamp: Option<&CheckedStamp>) {
        if let Some(t) = &self.trace {
            t.signal(from, signal.epoch, signal.round, false);
        }
        let checked = self.checked.as_deref();
        self.barrier
            .heard(from, signal, stamp, checked, &self.stats);
    }

    /// A peer's Hello passed the checks: join the barriers where it is if
    /// this rank has run none yet (it restarted), and note its run (see
    /// [`Members::joined`]).
    pub fn peer_joined(&self, h: &Hello, accepted: bool) {
        if self.barrier.adopt(h.barrier_epoch) {
            tracing::info!(
                rank = self.config.rank,
                "joining the cluster's barriers at epoch {} (learnt from rank {})",
                h.barrier_epoch,
                h.rank
            );
        }
        self.members
            .joined(self.config.rank, h.rank, h.epoch, accepted);
    }
}
