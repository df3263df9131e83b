//! The origin side of one (origin, target) connection.
//!
//! - this file: the [`Link`] — its peer, its state (up, or lost and why)
//!   and its tasks;
//! - [`issue`]: the one way a request goes onto the link;
//! - [`outbox`]: queueing, flushing and writing what leaves;
//! - [`waiter`]: who waits for an op, without a channel per op;
//! - [`reader`]: the reply reader, which matches replies to waiters by id
//!   through the pure [`PeerOps`] table, and the sweeper of expired ops;
//! - [`quiet`]: what `quiet` asks of a link;
//! - [`implicit`]: the failures of requests no handle waits for.
//!
//! Callers write their request frames themselves (no hand-off to a writer
//! task: one fewer thread wake per op). When the connection breaks, every
//! outstanding op fails at once with an error naming the peer, and later
//! ops to it fail immediately.

use super::handshake::Established;
use super::{FrameReader, RankState};
use crate::error::Error;
use bytes::{Bytes, BytesMut};
use outbox::Outbox;
use pld_proto::lock::Locked;
use pld_proto::track::PeerOps;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use waiter::Table;

pub(crate) mod implicit;
mod issue;
pub(crate) mod outbox;
mod quiet;
mod reader;
mod waiter;
pub(crate) use issue::{Handle, HandleInto, Implicit, Issue, Landing};
pub(crate) use waiter::{Pending, Sink, Waiter};

/// A successful reply.
#[derive(Debug)]
pub(crate) enum Reply {
    Ack,
    Data(Bytes),
    /// A get reply read straight into the op's own buffer.
    Filled(BytesMut),
    Value(i64),
}

/// One peer, as seen by the origin.
#[derive(Debug)]
pub(crate) struct Link {
    pub peer: u32,
    pub addr: String,
    pub remote: SocketAddr,
    /// The largest payload the peer accepts in one frame.
    pub peer_max_payload: usize,
    /// The peer's run (its Hello's epoch) this link reaches.
    pub epoch: u64,
    /// Everything that leaves on the link: queueing, flushing, writing.
    outbox: Outbox,
    ops: Mutex<Table>,
    lost: OnceLock<String>,
    /// Tasks in `quiet` waiting on this link; completions wake them only
    /// when there are any.
    quiet_waiters: AtomicUsize,
    progress: Notify,
    quic: Option<quinn::Connection>,
    /// The spinning socket (TCP, spin progress), whose reader spins only
    /// while replies are due.
    spin: Option<Arc<crate::transport::SpinTcp>>,
    state: Arc<RankState>,
}

impl Link {
    pub fn new(state: Arc<RankState>, est: Established) -> (Arc<Link>, FrameReader) {
        let peer = est.peer.rank;
        let spin = est.writer.spin().cloned();
        let link = Link {
            peer,
            addr: state.config().peers[peer as usize].clone(),
            remote: est.remote,
            peer_max_payload: (est.peer.max_payload as usize).clamp(4096, u32::MAX as usize),
            epoch: est.peer.epoch,
            outbox: Outbox::new(state.clone(), est.writer),
            ops: Mutex::new(Table::new(state.implicit().clone())),
            lost: OnceLock::new(),
            quiet_waiters: AtomicUsize::new(0),
            progress: Notify::new(),
            quic: est.quic,
            spin,
            state,
        };
        (Arc::new(link), est.reader)
    }

    /// Starts the link's tasks on the current runtime: the reader of
    /// replies, the sweeper of expired ops and the flusher of the outbox.
    /// Each ends once the link is lost.
    /// replies, the sweeper of expired ops and the flusher of the outbox.
    /// Each ends once the link is lost.
    pub(crate) fn spawn_tasks(self: &Arc<Self>, reader: FrameReader, tasks: &mut JoinSet<()>) {
        tasks.spawn(reader::run(self.clone(), reader));
        tasks.spawn(reader::sweep(self.clone()));
        tasks.spawn(Outbox::flusher(self.clone()));
    }

    /// Lets the reader spin exactly while ops await replies (call with the
    /// table locked, so that issue and completion cannot race).
    #[inline]
    pub(super) fn spin_for_replies(&self, ops: &PeerOps<Waiter>) {
        if let Some(s) = &self.spin {
            s.want_replies(ops.outstanding() > 0);
        }
    }

    /// Lets the reader spin while a barrier waits for the peer's signal on
    /// this link (see `peer::signal`), whether or not replies are due.
    pub fn expect_signals(&self, on: bool) {
        if let Some(s) = &self.spin {
            s.want_signals(on);
        }
    }

    #[inline]
    pub(super) fn ops(&self) -> MutexGuard<'_, Table> {
        // A panic while holding this lock would be a bug in PeerOps; the
        // table is still consistent (every method leaves it whole), so keep going.
        self.ops.locked()
    }

    pub(super) fn lost_error(&self) -> Option<Error> {
        self.lost.get().map(|reason| Error::PeerLost {
            rank: self.peer,
            reason: reason.clone(),
        })
    }

    pub(super) fn lost_or_reset(&self) -> Error {
        self.lost_error().unwrap_or(Error::PeerLost {
            rank: self.peer,
            reason: "the link was reset".into(),
        })
    }

    /// quinn's statistics of this link's connection (QUIC only).
    pub fn quic_stats(&self) -> Option<quinn::ConnectionStats> {
        self.quic.as_ref().map(quinn::Connection::stats)
    }

    /// Why the link is gone, if it is.
    pub fn lost_reason(&self) -> Option<&str> {
        self.lost.get().map(String::as_str)
    }

    /// Marks the link lost: every outstanding op fails with `reason`, and so
    /// does every later op. The first reason wins.
    pub fn fail(&self, reason: String) {
        self.lose(reason, true);
    }

    /// Marks the link lost. A `broken` link (an error, not an orderly
    /// close) is logged as a warning and its QUIC connection closed at once;
    /// an orderly close leaves the connection to finish what was written.
    fn lose(&self, reason: String, broken: bool) {
        if self.lost.set(reason).is_err() {
            return;
        }
        let reason = self.lost.get().cloned().unwrap_or_default();
        if broken {
            tracing::warn!(peer = self.peer, addr = %self.addr, "rank {} is unreachable: {reason}", self.peer);
        } else {
            tracing::info!(peer = self.peer, addr = %self.addr, "link to rank {} closed: {reason}", self.peer);
        }
        let mut ops = self.ops();
        for op in ops.drain() {
            self.state.stats().failed(op.kind);
            let lost = Err(Error::PeerLost {
                rank: self.peer,
                reason: reason.clone(),
            });
            ops.hand(op.id, op.waiter, lost);
        }
        drop(ops);
        self.outbox.lost();
        if broken && let Some(q) = &self.quic {
            q.close(0u32.into(), b"link lost");
        }
        self.wake_quiet();
    }

    /// Gives the link up without a word (the rank is being dropped):
    /// outstanding ops fail.
    pub fn abandon(&self) {
        self.lose("this rank was dropped".into(), false);
    }

    /// Closes the link because this rank shuts down: outstanding ops fail,
    /// and the stream is finished so that everything already written —
    /// the last barrier signal, say — reaches the peer before the
    /// connection goes.
    pub async fn close(&self) {
        self.lose("this rank shut down".into(), false);
        self.outbox.close().await;
    }

    fn wake_quiet(&self) {
        if self.quiet_waiters.load(Ordering::Acquire) > 0 {
            self.progress.notify_waiters();
        }
    }
}
