//! The link's reply reader — replies matched to their ops' waiters by id,
//! a get's bytes read straight into its buffer or window, barrier signals
//! handed to the barrier — and the sweeper that fails ops past the op
//! timeout.

use super::{Link, Reply, Sink, Table, Waiter};
use crate::error::{Error, Result};
use crate::peer::FrameReader;
use bytes::Bytes;
use pld_proto::reply::{Answer, answer};
use pld_proto::v1::header::Body;
use pld_proto::{Frame, MsgKind, OpKind};
use std::sync::Arc;

impl Link {
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
        if let (Some(c), Some(s)) = (self.state.checked(), &frame.header.checked) {
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
        let stats = self.state.stats();
        let trace = self.state.trace();
        let completed = ops.complete_acked(first, last, |op, live| {
            if op.kind.answered_by_ack() {
                run.add(stats, op.kind, op.issued_at, now);
                if let Some(t) = trace {
                    t.op(self.peer, op.kind, op.id, op.issued_at, now, true);
                }
                return live.then_some(Ok(Reply::Ack));
            }
            // Not answered by an ack: fails, naming itself.
            let ack = Some(Body::Ack(Default::default()));
            let reply = self.reply(op.kind, op.id, ack, Bytes::new());
            match &reply {
                Ok(_) => run.add(stats, op.kind, op.issued_at, now),
                Err(_) => stats.failed(op.kind),
            }
            if let Some(t) = trace {
                t.op(self.peer, op.kind, op.id, op.issued_at, now, reply.is_ok());
            }
            Some(reply)
        }) > 0;
        run.flush(self.state.stats(), now);
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
            self.state.stats().failed(op.kind);
        } else {
            let took = now.saturating_duration_since(op.issued_at);
            self.state.stats().completed(op.kind, took);
        }
        if let Some(t) = self.state.trace() {
            t.op(self.peer, op.kind, op.id, op.issued_at, now, reply.is_ok());
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
}

/// Fails the ops of `link` that have waited longer than the op timeout,
/// every tenth of it, so that no op needs a timer of its own.
pub(super) async fn sweep(link: Arc<Link>) {
    let timeout = link.state.config().op_timeout;
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
            link.state.stats().failed(op.kind);
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
pub(super) async fn run(link: Arc<Link>, mut reader: FrameReader) {
    let reason = loop {
        // An ack (the reply to most small ops) is taken straight from its
        // fields; everything else takes the general path.
        if let Some(a) = reader.peek_ack() {
            reader.consume_ack(a);
            link.state.activity().touch();
            link.state.stats().received(MsgKind::Ack, a.len);
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
        link.state.activity().touch();
        link.state
            .stats()
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
                link.state.windows().board().changed();
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
            link.state
                .heard_signal(link.peer, b, header.checked.as_ref());
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
