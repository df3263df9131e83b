//! The origin side of one (origin, target) connection.
//!
//! Callers write their request frames directly (no hand-off to a writer
//! task: one fewer thread wake per op) under an async mutex; one reader task
//! matches replies to waiters by id through the pure [`PeerOps`] table.
//! When the connection breaks, every outstanding op fails at once with an
//! error naming the peer, and later ops to it fail immediately.

use super::handshake::Established;
use super::outbox::{self, Outbox};

pub(crate) mod implicit;
mod send;
mod waiter;
use super::{FrameReader, RankState};
use crate::error::{Error, Result};
use crate::transport::PeerWriter;
use bytes::{Bytes, BytesMut};
use pld_proto::lock::Locked;
use pld_proto::reply::{Answer, answer};
use pld_proto::track::PeerOps;
use pld_proto::v1::{BarrierSignal, header::Body};
use pld_proto::{Frame, MsgKind, OpKind};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;
use waiter::Table;
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
    /// `None` once a cancelled write left half a frame on the stream.
    pub(super) writer: tokio::sync::Mutex<Option<PeerWriter>>,
    /// Small request frames waiting for the scheduled flush.
    pub(super) outbox: Mutex<Outbox>,
    /// Wakes the link's flusher task (`send::flusher`) when a flush is
    /// scheduled, and when the link is lost (the flusher then ends).
    pub(super) flush_wake: Notify,
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
    pub(super) state: Arc<RankState>,
}

impl Link {
    pub fn new(state: Arc<RankState>, est: Established) -> (Arc<Link>, FrameReader) {
        let peer = est.peer.rank;
        let spin = est.writer.spin().cloned();
        let link = Link {
            peer,
            addr: state.config.peers[peer as usize].clone(),
            remote: est.remote,
            peer_max_payload: (est.peer.max_payload as usize).clamp(4096, u32::MAX as usize),
            epoch: est.peer.epoch,
            writer: tokio::sync::Mutex::new(Some(est.writer)),
            outbox: Mutex::new(Outbox::default()),
            flush_wake: Notify::new(),
            ops: Mutex::new(Table::new(state.implicit.clone())),
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
    pub(crate) fn spawn_tasks(self: &Arc<Self>, reader: FrameReader, tasks: &mut JoinSet<()>) {
        tasks.spawn(run_reader(self.clone(), reader));
        tasks.spawn(sweep(self.clone()));
        tasks.spawn(send::flusher(self.clone()));
    }

    /// Lets the reader spin exactly while ops await replies (call with the
    /// table locked, so that issue and completion cannot race).
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

    /// Sends one request frame; the returned [`Pending`] resolves with its reply.
    pub async fn send(self: &Arc<Self>, op: OpKind, body: Body, payload: &[u8]) -> Result<Pending> {
        self.send_with(op, body, payload, None).await
    }

    /// Sends a get whose reply goes straight into `sink` (exactly as long
    /// as the reply); it comes back as [`Reply::Filled`].
    pub async fn send_into(self: &Arc<Self>, body: Body, sink: BytesMut) -> Result<Pending> {
        self.send_with(OpKind::Get, body, &[], Some(sink)).await
    }

    async fn send_with(
        self: &Arc<Self>,
        op: OpKind,
        body: Body,
        payload: &[u8],
        sink: Option<BytesMut>,
    ) -> Result<Pending> {
        let waiter = Waiter::new(sink);
        let issue = move |ops: &mut PeerOps<Waiter>, now| ops.issue(op, now, waiter);
        let id = self.write(op, body, payload, issue).await?;
        Ok(Pending::new(self.clone(), id))
    }

    /// Sends a barrier message (one-way: id 0, no reply).
    pub async fn signal(&self, epoch: u64, round: u32) -> Result<()> {
        let body = Body::Barrier(BarrierSignal { epoch, round });
        self.write_now(body, &[], |_, _| 0).await.map(|_| ())
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

    /// Hands a reply to whoever waits for its op — for a cumulative
    /// acknowledgement, to every op it covers.
    fn deliver(&self, frame: Frame) {
        let id = frame.header.id;
        if let Some(Body::Ack(a)) = &frame.header.body
            && a.first != 0
        {
            return self.deliver_acks(a.first, id);
        }
        let mut ops = self.ops();
        let completed = ops.complete(id);
        self.spin_for_replies(&ops);
        let Some(op) = completed else {
            drop(ops);
            tracing::debug!(
                peer = self.peer,
                id,
                "reply to no outstanding op (timed out or stale)"
            );
            return;
        };
        // Checked mode: a fetching atomic's reply carries its cell's clock,
        // acquired before the op's handle sees it complete.
        if let (Some(c), Some(s)) = (&self.state.checked, &frame.header.checked) {
            drop(ops);
            c.acquire(s);
            ops = self.ops();
        }
        let mut reply = self.reply(op.kind, id, frame.header.body, frame.payload);
        // A get landing in window memory whose reply did not go there (the
        // right length would have): the target answered it wrongly.
        if let (Waiter::Landing(raw), Ok(r)) = (&op.waiter, &reply) {
            reply = Err(self.wrong_landing(id, raw.len, r));
        }
        self.finish(&mut ops, op, reply, std::time::Instant::now());
        drop(ops);
        self.wake_quiet();
    }

    /// A cumulative acknowledgement of ops `first..=last`: each outstanding
    /// one completes as if acknowledged alone (an op of a kind that an ack
    /// does not answer fails, naming itself).
    fn deliver_acks(&self, first: u64, last: u64) {
        if first > last {
            tracing::warn!(
                peer = self.peer,
                first,
                last,
                "ignored a cumulative ack of no sensible range"
            );
            return;
        }
        // One look at the clock for the whole run; the table stays locked
        // while the run's ops complete (handing each its reply only wakes
        // its waiter).
        let now = std::time::Instant::now();
        let mut ops = self.ops();
        // Ops queued together share their issue time: their latencies are
        // counted as one run, not one by one.
        let mut run = crate::stats::CompletedRun::default();
        let stats = &self.state.stats;
        let completed = ops.complete_acked(first, last, |op, live| {
            if op.kind.answered_by_ack() {
                run.add(stats, op.kind, op.issued_at, now);
                return live.then_some(Ok(Reply::Ack));
            }
            // Not answered by an ack: fails, naming itself.
            let ack = Some(Body::Ack(Default::default()));
            let reply = self.reply(op.kind, op.id, ack, Bytes::new());
            match &reply {
                Ok(_) => run.add(stats, op.kind, op.issued_at, now),
                Err(_) => stats.failed(op.kind),
            }
            Some(reply)
        }) > 0;
        run.flush(&self.state.stats, now);
        self.spin_for_replies(&ops);
        drop(ops);
        if !completed {
            tracing::debug!(
                peer = self.peer,
                first,
                last,
                "ack of no outstanding op (timed out or stale)"
            );
        }
        self.wake_quiet();
    }

    /// What a reply body means for op `id` of kind `kind`.
    fn reply(&self, kind: OpKind, id: u64, body: Option<Body>, payload: Bytes) -> Result<Reply> {
        match answer(kind, body) {
            Answer::Ack => Ok(Reply::Ack),
            Answer::Data => Ok(Reply::Data(payload)),
            Answer::Value(v) => Ok(Reply::Value(v)),
            Answer::Refused { code, message } => Err(Error::Rejected {
                rank: self.peer,
                op: kind,
                id,
                code,
                message,
            }),
            Answer::Mismatch { op: kind, got } => Err(Error::Protocol {
                rank: self.peer,
                reason: format!("answered {kind} #{id} with {got}"),
            }),
        }
    }

    /// The error of get `id`, of `want` bytes into window memory, answered
    /// with `got`.
    fn wrong_landing(&self, id: u64, want: usize, got: &Reply) -> Error {
        let got = match got {
            Reply::Data(d) => format!("{} bytes", d.len()),
            other => format!("{other:?}"),
        };
        Error::Protocol {
            rank: self.peer,
            reason: format!("answered get #{id} of {want} bytes with {got}"),
        }
    }

    /// Counts a completed op (done at `now`) and hands its reply to its
    /// handle (with the table locked).
    fn finish(
        &self,
        table: &mut Table,
        op: pld_proto::track::Outstanding<Waiter>,
        reply: Result<Reply>,
        now: std::time::Instant,
    ) {
        if reply.is_err() {
            self.state.stats.failed(op.kind);
        } else {
            let took = now.saturating_duration_since(op.issued_at);
            self.state.stats.completed(op.kind, took);
        }
        table.hand(op.id, op.waiter, reply);
    }

    /// Completes get `id` whose reply was read into its sink (see
    /// [`Table::take_sink`]) with `reply`; nothing if it failed meanwhile.
    fn complete_read(&self, id: u64, reply: Reply) {
        let mut ops = self.ops();
        if let Some(op) = ops.complete(id) {
            self.spin_for_replies(&ops);
            let now = std::time::Instant::now();
            self.finish(&mut ops, op, Ok(reply), now);
        }
        drop(ops);
        self.wake_quiet();
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
            self.state.stats.failed(op.kind);
            let lost = Err(Error::PeerLost {
                rank: self.peer,
                reason: reason.clone(),
            });
            ops.hand(op.id, op.waiter, lost);
        }
        drop(ops);
        // The flusher ends (what is still queued fails with the link, or
        // `close` writes it). Queued frames count as issued and sent, as
        // they did before the outbox tallied them.
        self.outbox.locked().tally.flush(&self.state.stats);
        self.flush_wake.notify_one();
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
        let mut writer = self.writer.lock().await;
        let queued = self.outbox.locked().take(&self.state);
        if let Some(mut w) = writer.take() {
            if !queued.is_empty() {
                let _ = outbox::write_after(&mut w, queued, &[]).await;
            }
            super::finish(&mut w).await;
        }
    }

    fn wake_quiet(&self) {
        if self.quiet_waiters.load(Ordering::Acquire) > 0 {
            self.progress.notify_waiters();
        }
    }

    /// A ticket covering every op issued to this peer so far.
    pub fn ticket(&self) -> u64 {
        self.ops().next_id()
    }

    /// Whether nothing is queued or outstanding: a quiet has nothing to
    /// wait for here.
    pub fn is_idle(&self) -> bool {
        self.outbox.locked().buf.is_empty() && self.ops().outstanding() == 0
    }

    /// Waits until every op below `ticket` has completed, or `deadline`.
    /// Returns whether they all completed.
    pub async fn wait_done_before(&self, ticket: u64, deadline: Instant) -> bool {
        // Most links of a quiet (or a barrier's) have nothing outstanding.
        if self.ops().done_before(ticket) {
            return true;
        }
        self.quiet_waiters.fetch_add(1, Ordering::AcqRel);
        let _dec = Decrement(&self.quiet_waiters);
        loop {
            let notified = self.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.ops().done_before(ticket) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.ops().done_before(ticket);
            }
        }
    }

    /// What is still outstanding below `ticket`, for a diagnostic:
    /// `rank 1: 2 ops (put #7 for 3.0s, get #9 for 2.9s)`.
    pub fn report_before(&self, ticket: u64) -> Option<String> {
        let pending = self.ops().pending_before(ticket);
        if pending.is_empty() {
            return None;
        }
        let now = std::time::Instant::now();
        let mut shown: Vec<String> = pending
            .iter()
            .take(4)
            .map(|(id, kind, at)| format!("{kind} #{id} for {:.1?}", now.duration_since(*at)))
            .collect();
        if pending.len() > shown.len() {
            shown.push(format!("{} more", pending.len() - shown.len()));
        }
        let state = match self.lost.get() {
            Some(r) => format!(", link lost: {r}"),
            None => String::new(),
        };
        Some(format!(
            "rank {}: {} op{} ({}){state}",
            self.peer,
            pending.len(),
            if pending.len() == 1 { "" } else { "s" },
            shown.join(", ")
        ))
    }
}

struct Decrement<'a>(&'a AtomicUsize);
impl Drop for Decrement<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Fails the ops of `link` that have waited longer than the op timeout,
/// every tenth of it, so that no op needs a timer of its own.
async fn sweep(link: Arc<Link>) {
    let timeout = link.state.config.op_timeout;
    let tick = (timeout / 10).max(std::time::Duration::from_millis(10));
    loop {
        tokio::time::sleep(tick).await;
        if link.lost.get().is_some() {
            return;
        }
        let Some(cutoff) = std::time::Instant::now().checked_sub(timeout) else {
            continue;
        };
        let mut ops = link.ops();
        let expired = ops.expire(cutoff);
        link.spin_for_replies(&ops);
        if expired.is_empty() {
            continue;
        }
        for op in expired {
            link.state.stats.failed(op.kind);
            let timed_out = Err(Error::OpTimeout {
                rank: link.peer,
                op: op.kind,
                id: op.id,
                timeout,
            });
            ops.hand(op.id, op.waiter, timed_out);
        }
        drop(ops);
        link.wake_quiet();
    }
}

/// Reads replies until the connection ends, then fails the link. Each
/// reply handed over lets its caller run before the next read
/// ([`FrameReader::woke_a_task`]).
async fn run_reader(link: Arc<Link>, mut reader: FrameReader) {
    let reason = loop {
        // An ack (the reply to most small ops) is taken straight from its
        // fields; everything else takes the general path.
        if let Some(a) = reader.peek_ack() {
            reader.consume_ack(a);
            link.state.activity.touch();
            link.state.stats.received(MsgKind::Ack, a.len);
            let first = if a.first == 0 { a.id } else { a.first };
            link.deliver_acks(first, a.id);
            reader.woke_a_task();
            continue;
        }
        let (header, len) = match reader.try_head() {
            Ok(Some(head)) => head,
            Ok(None) => match reader.fill().await {
                Ok(()) => continue,
                Err(e) => break e.to_string(),
            },
            Err(e) => break e.to_string(),
        };
        link.state.activity.touch();
        link.state
            .stats
            .received(MsgKind::of(&header), pld_proto::frame::PREFIX_LEN + len);
        // A get reply whose op brought its own buffer goes straight into it.
        // (The op stays outstanding meanwhile: if the read fails, the link
        // fails it with the rest.)
        let sink = matches!(header.body, Some(Body::GetReply(_)))
            .then(|| link.ops().take_sink(header.id, len))
            .flatten();
        if let Some(sink) = sink {
            let (raw, reply) = match sink {
                Sink::Buf(mut b) => {
                    let raw = crate::transport::Raw {
                        ptr: b.as_mut_ptr(),
                        len: b.len(),
                    };
                    (raw, Reply::Filled(b))
                }
                // (Window memory outlives the link: the link holds the rank.)
                Sink::Window(raw) => (raw, Reply::Ack),
            };
            if let Err(e) = reader.payload_into_raw(std::iter::once(raw)).await {
                break e.to_string();
            }
            if matches!(reply, Reply::Ack) {
                // Window bytes changed: a `wait` on them looks again.
                link.state.windows.board().changed();
            }
            link.complete_read(header.id, reply);
            reader.woke_a_task();
            continue;
        }
        let payload = match reader.payload().await {
            Ok(payload) => payload,
            Err(e) => break e.to_string(),
        };
        // The link of a rank to a higher one carries the pair's barrier
        // signals both ways (see `peer::signal`).
        if let Some(Body::Barrier(b)) = &header.body {
            super::signal::heard(&link.state, link.peer, b, header.checked.as_ref());
        } else {
            link.deliver(Frame { header, payload });
        }
        reader.woke_a_task();
    };
    // A peer that closed its QUIC connection on purpose says why; that is
    // news, not an alarm.
    if let Some(quinn::ConnectionError::ApplicationClosed(c)) =
        link.quic.as_ref().and_then(|q| q.close_reason())
    {
        let why = String::from_utf8_lossy(&c.reason).into_owned();
        return link.lose(
            format!("rank {} closed the connection: {why}", link.peer),
            false,
        );
    }
    link.fail(reason);
}
