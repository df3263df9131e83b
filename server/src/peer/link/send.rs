//! How a link's requests leave: queued in the outbox with a flush
//! scheduled (small ones), or written at once behind what is queued (large
//! ones, barrier signals); the flush itself; and the guard that fails the
//! link when a write is cancelled half way. See `peer::outbox` for the
//! rules of coalescing.

use super::{Link, Pending, Waiter};
use crate::error::Result;
use crate::peer::outbox::{COALESCE_MAX, Outbox, WRITE_AT, write_after};
use crate::transport::{PeerWriter, Raw};
use bytes::BytesMut;
use pld_proto::frame::{Store, encode_store_head};
use pld_proto::lock::Locked;
use pld_proto::track::PeerOps;
use pld_proto::v1::{Header, header::Body};
use pld_proto::{MsgKind, OpKind};
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

impl Link {
    /// Issues one frame. A small one is queued in the outbox behind any
    /// others and a flush scheduled (see `outbox`); a large one is written
    /// at once, after what is queued. `id` picks the frame's id with the
    /// outbox locked — so a caller cancelled before that has recorded
    /// nothing, and ids follow the order of the frames on the stream.
    pub(super) async fn write(
        self: &Arc<Self>,
        op: OpKind,
        body: Body,
        payload: &[u8],
        id: impl FnOnce(&mut PeerOps<Waiter>, Instant) -> u64,
    ) -> Result<u64> {
        if let Some(e) = self.lost_error() {
            return Err(e);
        }
        if payload.len() > COALESCE_MAX {
            let id = self.write_now(body, payload, id).await?;
            self.state.stats.issued(op);
            return Ok(id);
        }
        let (id, full) = self.queue(op, body, payload, id);
        if full {
            self.flush().await;
        }
        Ok(id)
    }

    /// Queues one small frame of an `op` (its payload at most
    /// `COALESCE_MAX`) in the outbox and schedules a flush: no write
    /// happens here. Returns its id and whether the outbox is full enough
    /// that the caller should flush it now. The op counts as issued, and
    /// its frame as sent, when the flush takes it.
    pub(super) fn queue(
        self: &Arc<Self>,
        op: OpKind,
        body: Body,
        payload: &[u8],
        id: impl FnOnce(&mut PeerOps<Waiter>, Instant) -> u64,
    ) -> (u64, bool) {
        debug_assert!(payload.len() <= COALESCE_MAX);
        if self.state.checked.is_none()
            && let Some((store, window, offset)) = Store::of(&body)
        {
            return self.queue_store_frame(store, window, offset, payload, id);
        }
        let mut outbox = self.outbox.locked();
        let now = outbox.stamp();
        let before = outbox.buf.len();
        let header = self.header(body, |ops| id(ops, now));
        pld_proto::frame::encode_head(&header, payload.len(), &mut outbox.buf);
        outbox.buf.extend_from_slice(payload);
        let full = self.queued(&mut outbox, op, MsgKind::of(&header), before);
        (header.id, full)
    }

    /// Queues a put or atomic add of at most `COALESCE_MAX` bytes (and at
    /// most one frame): nothing is written here, so no await. Returns its
    /// handle and whether the caller should [`Link::flush`] now (the
    /// outbox is full).
    pub fn queue_store(
        self: Arc<Self>,
        store: Store,
        window: u32,
        offset: u64,
        payload: &[u8],
    ) -> Result<(Pending, bool)> {
        let (id, full) = self.queue_store_as(store, window, offset, payload, false)?;
        // The caller's reference becomes the handle's: no second count.
        Ok((Pending::new(self, id), full))
    }

    /// [`Link::queue_store`] for a store no handle waits for
    /// ([`Rank::put_nbi`](crate::Rank::put_nbi),
    /// [`Rank::atomic_add_nbi`](crate::Rank::atomic_add_nbi)): its failure
    /// goes to the next `quiet`. Returns whether the caller should flush
    /// now.
    pub fn queue_store_implicit(
        self: &Arc<Self>,
        store: Store,
        window: u32,
        offset: u64,
        payload: &[u8],
    ) -> Result<bool> {
        let (_, full) = self.queue_store_as(store, window, offset, payload, true)?;
        Ok(full)
    }

    /// Issues a get (`body`) no handle waits for, whose reply's bytes land
    /// in `into`, this rank's own window memory, straight from the socket
    /// ([`Rank::get_nbi`](crate::Rank::get_nbi)): its failure goes to the
    /// next `quiet`. Queued as any small request.
    pub async fn get_landing(self: &Arc<Self>, body: Body, into: Raw) -> Result<()> {
        let issue = move |ops: &mut PeerOps<Waiter>, now| {
            ops.issue(OpKind::Get, now, Waiter::Landing(into))
        };
        self.write(OpKind::Get, body, &[], issue).await.map(drop)
    }

    // Inlined into each of its callers, as is `queue_store_frame`: as
    // calls they cost a put ~40 instructions (callgrind).
    #[inline(always)]
    fn queue_store_as(
        self: &Arc<Self>,
        store: Store,
        window: u32,
        offset: u64,
        payload: &[u8],
        implicit: bool,
    ) -> Result<(u64, bool)> {
        if let Some(e) = self.lost_error() {
            return Err(e);
        }
        // The waiter is made in place (a `Waiter` passed in is moved twice).
        let issue = |ops: &mut PeerOps<Waiter>, now| {
            let waiter = match implicit {
                true => Waiter::Implicit,
                false => Waiter::new(None),
            };
            ops.issue(store.op(), now, waiter)
        };
        Ok(match self.state.checked {
            // The common small ops, and the message-rate benchmark's.
            None => self.queue_store_frame(store, window, offset, payload, issue),
            Some(_) => self.queue(store.op(), store.body(window, offset), payload, issue),
        })
    }

    /// [`Link::queue`] for a plain put or atomic add (not in checked mode,
    /// where a request carries a stamp): its frame head is written straight
    /// from its fields, as the generic encoder would write it — no
    /// `Header` or `Body` is built.
    #[inline(always)]
    pub(super) fn queue_store_frame(
        &self,
        store: Store,
        window: u32,
        offset: u64,
        payload: &[u8],
        id: impl FnOnce(&mut PeerOps<Waiter>, Instant) -> u64,
    ) -> (u64, bool) {
        let mut outbox = self.outbox.locked();
        let now = outbox.stamp();
        let before = outbox.buf.len();
        let id = self.take_id(|ops| id(ops, now));
        encode_store_head(id, store, window, offset, payload.len(), &mut outbox.buf);
        outbox.buf.extend_from_slice(payload);
        (
            id,
            self.queued(&mut outbox, store.op(), store.msg_kind(), before),
        )
    }

    /// Counts the frame just queued (from byte `before` on) and schedules
    /// a flush if none is; whether the outbox is full enough that the
    /// caller should flush it now.
    fn queued(&self, outbox: &mut Outbox, op: OpKind, kind: MsgKind, before: usize) -> bool {
        let bytes = outbox.buf.len() - before;
        outbox.tally.add(&self.state.stats, op, kind, bytes);
        if !outbox.scheduled {
            outbox.scheduled = true;
            self.flush_wake.notify_one();
        }
        outbox.buf.len() >= WRITE_AT
    }

    /// Writes one frame now, under the writer lock, behind whatever the
    /// outbox holds.
    pub(super) async fn write_now(
        &self,
        body: Body,
        payload: &[u8],
        id: impl FnOnce(&mut PeerOps<Waiter>, Instant) -> u64,
    ) -> Result<u64> {
        if let Some(e) = self.lost_error() {
            return Err(e);
        }
        let mut writer = self.lock_writer().await;
        // The header goes behind what is queued, in the outbox's buffer.
        let (mut out, header) = {
            let mut outbox = self.outbox.locked();
            (
                outbox.take(&self.state),
                self.header(body, |ops| id(ops, Instant::now())),
            )
        };
        let before = out.len();
        pld_proto::frame::encode_head(&header, payload.len(), &mut out);
        let head = out.len() - before;
        writer.write_or_fail(out, payload).await?;
        self.sent(MsgKind::of(&header), head + payload.len());
        Ok(header.id)
    }

    /// Writes what the outbox holds now, instead of leaving it to the
    /// scheduled flush: whoever is about to wait for replies sends its
    /// requests itself, at no cost of a task switch. (Cancelled in the
    /// middle of the write, it fails the link, as any half-written frame
    /// does.) A failed write has failed the link and its ops.
    pub async fn flush(&self) {
        if !self.outbox.locked().buf.is_empty() {
            self.write_queued(false).await;
        }
    }

    /// Writes what the outbox holds; whether it wrote (`false`: the outbox
    /// was empty, or the write failed and failed the link). `scheduled`:
    /// the caller is the scheduled flush, which ends — clearing the mark
    /// under the outbox's lock — when it finds nothing left.
    async fn write_queued(&self, scheduled: bool) -> bool {
        let mut writer = self.lock_writer().await;
        let queued = {
            let mut outbox = self.outbox.locked();
            if outbox.buf.is_empty() {
                if scheduled {
                    outbox.scheduled = false;
                }
                writer.disarm();
                return false;
            }
            outbox.take(&self.state)
        };
        if writer.write_or_fail(queued, &[]).await.is_err() {
            // The link failed; later ops fail at once.
            self.outbox.locked().scheduled = false;
            return false;
        }
        true
    }

    /// The header of a request about to be queued or written: its id
    /// (taken now), and in checked mode this rank's clock (for a barrier
    /// signal, the join of what it heard of that barrier).
    fn header(&self, body: Body, id: impl FnOnce(&mut PeerOps<Waiter>) -> u64) -> Header {
        let id = self.take_id(id);
        let checked = self.state.checked.as_ref().map(|c| c.stamp_for(&body));
        Header {
            id,
            body: Some(body),
            checked,
        }
    }

    /// A request's id, taken from the op table (which then spins for its
    /// reply).
    #[inline(always)]
    fn take_id(&self, id: impl FnOnce(&mut PeerOps<Waiter>) -> u64) -> u64 {
        let id = {
            let mut ops = self.ops();
            let id = id(&mut ops);
            self.spin_for_replies(&ops);
            id
        };
        // After the table's lock: the order `peer::touched` relies on. Id 0
        // is a barrier signal: written at once, no op for a quiet to wait on.
        if id != 0 {
            self.state.touched.mark(self.peer);
        }
        id
    }

    fn sent(&self, kind: MsgKind, bytes: usize) {
        self.state.stats.sent(kind, bytes);
        self.state.activity.touch();
    }

    /// The writer, held until the guard goes.
    pub(super) async fn lock_writer(&self) -> WriterGuard<'_> {
        WriterGuard {
            link: self,
            writer: self.writer.lock().await,
            armed: true,
        }
    }
}

/// Holds the writer while frames are written. If the caller is cancelled
/// in the middle, the stream holds half a frame and cannot carry another:
/// the guard drops the writer (the peer sees the stream end) and fails
/// the link.
pub(super) struct WriterGuard<'a> {
    link: &'a Link,
    writer: tokio::sync::MutexGuard<'a, Option<PeerWriter>>,
    armed: bool,
}

impl WriterGuard<'_> {
    /// Lets the writer go untouched.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }

    /// Writes `queued` (frames, the last one's payload possibly apart),
    /// then `payload`. A peer that stops reading
    /// (cut off by a partition, hung) blocks the write once the socket's
    /// buffers fill, and TCP would wait for many minutes: after the op
    /// timeout the writer goes (the stream holds half a frame) and the
    /// link fails, as it does on any write error.
    pub(super) async fn write_or_fail(&mut self, queued: BytesMut, payload: &[u8]) -> Result<()> {
        let link = self.link;
        let Some(writer) = self.writer.as_mut() else {
            self.armed = false;
            return Err(link.lost_or_reset());
        };
        let timeout = link.state.config.op_timeout;
        // Most writes go straight into the socket's buffer: only one that
        // has to wait reads the clock and arms the timer.
        let waited = {
            let mut write = std::pin::pin!(write_after(writer, queued, payload));
            let first = std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await;
            match first {
                Poll::Ready(w) => Ok(w),
                Poll::Pending => tokio::time::timeout(timeout, write).await,
            }
        };
        let written = match waited {
            Ok(w) => w,
            Err(_) => {
                self.writer.take();
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no progress writing for {timeout:?}: the peer does not read, or the network is cut"
                    ),
                ))
            }
        };
        self.armed = false;
        match written {
            Ok(()) => Ok(()),
            // Fails every outstanding op of this link, this one included.
            Err(e) => {
                link.fail(format!("sending to {} failed: {e}", link.remote));
                Err(link.lost_or_reset())
            }
        }
    }
}

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.writer.take();
            self.link
                .fail("an op was cancelled while its frame was half written".into());
        }
    }
}

/// The link's flusher: each scheduled flush writes what the outbox holds
/// until it finds it empty; the task ends once the link is lost. A write
/// that fails or makes no progress for the op timeout fails the link
/// (every outstanding op with it).
///
/// One task for the link's life, woken through `flush_wake`, rather than
/// a task spawned per scheduled flush: a spawn cost a lone op ~1 000
/// instructions, about an eighth of its round trip's (docs/PERFORMANCE.md).
pub(super) async fn flusher(link: Arc<Link>) {
    loop {
        link.flush_wake.notified().await;
        if link.lost.get().is_some() {
            return;
        }
        link.flush_scheduled().await;
    }
}

impl Link {
    /// One scheduled flush. Most find the outbox already empty (whoever
    /// waits for its op has written it): that costs no writer lock.
    async fn flush_scheduled(&self) {
        loop {
            {
                let mut outbox = self.outbox.locked();
                if outbox.buf.is_empty() {
                    outbox.scheduled = false;
                    return;
                }
            }
            if !self.write_queued(true).await {
                return;
            }
        }
    }
}
