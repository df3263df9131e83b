//! The outbox: everything that leaves on a link — queueing, flushing and
//! writing — with one owner.
//!
//! A small request does not write its frame itself: it is encoded into the
//! queue (its id taken under the same lock, so ids follow the order of the
//! bytes on the stream) and, if no flush is scheduled, one is — the link's
//! flusher task wakes, takes everything queued by the time it runs and
//! writes it in one go. Nothing waits for company: there is no timer, the
//! flush is scheduled at once, and what it sends is what was already
//! queued. A program that issues 64 puts without yielding has all 64 in the
//! queue when the flush runs (one write, one cumulative acknowledgement
//! back); a lone op is written as soon as its caller yields — to wait for
//! it, to `quiet`, or for anything else.
//!
//! A frame written at once (a barrier signal, a payload too large to copy)
//! first takes what the queue holds, so the stream keeps issue order. Lock
//! order: the writer, then the queue, then the link's op table.
//!
//! A write that fails, makes no progress for the op timeout, or is
//! cancelled half way (the stream then holds half a frame) fails the link
//! and every op outstanding on it.

use super::Link;
use crate::error::Result;
use crate::peer::RankState;
use crate::stats::SentTally;
use crate::transport::PeerWriter;
use bytes::BytesMut;
use pld_proto::lock::Locked;
use pld_proto::{MsgKind, OpKind};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Instant;
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

pub(crate) use crate::peer::wire::COALESCE_MAX;

/// Once this much is queued, the issuing caller writes it itself: a
/// program that issues ops without ever yielding does not grow the queue
/// without bound. (Writing earlier, to let the target start on the first
/// part of a run while the rest is issued, measured slower: a loopback
/// send costs the sender the receiver's TCP processing too. See
/// docs/PERFORMANCE.md, "Small-op message rate".)
const WRITE_AT: usize = 64 * 1024;

/// How many queued ops share one look at the clock.
const STAMP_SHARED: u32 = 64;

/// A link's outbox; see the module's docs.
#[derive(Debug)]
pub(crate) struct Outbox {
    /// For the counters and spin activity of what is written.
    state: Arc<RankState>,
    /// `None` once a cancelled or timed-out write left half a frame on the
    /// stream.
    writer: tokio::sync::Mutex<Option<PeerWriter>>,
    queue: Mutex<Queue>,
    /// Wakes the flusher task when a flush is scheduled, and when the link
    /// is lost (the flusher then ends).
    wake: Notify,
}

/// Frames encoded but not yet written, and whether a flush is scheduled.
#[derive(Debug, Default)]
struct Queue {
    buf: BytesMut,
    scheduled: bool,
    /// The queued frames' counts, added to the rank's when they are taken.
    tally: SentTally,
    /// The issue time of the frames queued since the queue was last empty,
    /// and how many have shared it: ops queued together share their issue
    /// time (one look at the clock, not one per op), for at most
    /// `STAMP_SHARED` of them.
    stamp: Option<(Instant, u32)>,
}

impl Queue {
    /// The issue time of a frame queued now.
    #[inline]
    fn stamp(&mut self) -> Instant {
        match &mut self.stamp {
            Some((t, n)) if !self.buf.is_empty() && *n < STAMP_SHARED => {
                *n += 1;
                *t
            }
            s => {
                let t = Instant::now();
                *s = Some((t, 1));
                t
            }
        }
    }

    /// Takes every queued byte (the write that calls this sends them), and
    /// counts their frames as sent.
    fn take(&mut self, state: &RankState) -> BytesMut {
        state.activity().touch_n(self.tally.flush(state.stats()));
        self.buf.split()
    }
}

/// One frame being queued (see [`Outbox::begin`]).
pub(crate) struct Queuing<'a> {
    outbox: &'a Outbox,
    q: std::sync::MutexGuard<'a, Queue>,
    /// The frame's issue time.
    pub(crate) now: Instant,
    before: usize,
}

impl Queuing<'_> {
    /// Where the frame is appended.
    #[inline(always)]
    pub(crate) fn buf(&mut self) -> &mut BytesMut {
        &mut self.q.buf
    }

    /// The frame is in (an `op`, of `kind`): it is counted, a flush is
    /// scheduled if none is; whether the queue is full enough that the
    /// caller should [`Outbox::flush`] now.
    #[inline(always)]
    pub(crate) fn finish(mut self, op: OpKind, kind: MsgKind) -> bool {
        let bytes = self.q.buf.len() - self.before;
        let stats = self.outbox.state.stats();
        self.q.tally.add(stats, op, kind, bytes);
        if !self.q.scheduled {
            self.q.scheduled = true;
            self.outbox.wake.notify_one();
        }
        self.q.buf.len() >= WRITE_AT
    }
}

impl Outbox {
    pub fn new(state: Arc<RankState>, writer: PeerWriter) -> Outbox {
        Outbox {
            state,
            writer: tokio::sync::Mutex::new(Some(writer)),
            queue: Mutex::new(Queue::default()),
            wake: Notify::new(),
        }
    }

    /// Starts queueing one frame: the queue stays locked (so that the id
    /// the frame takes follows the bytes' order) until
    /// [`Queuing::finish`], which schedules a flush if none is. Nothing
    /// is written here. (A guard rather than a closure, so that a small
    /// put's whole path inlines.)
    #[inline(always)]
    pub fn begin(&self) -> Queuing<'_> {
        let mut q = self.queue.locked();
        let now = q.stamp();
        let before = q.buf.len();
        Queuing {
            outbox: self,
            q,
            now,
            before,
        }
    }

    /// Writes one frame now, behind whatever the queue holds: `head`
    /// appends its header (taking its id, which it returns with the
    /// frame's kind), then `payload` follows. On failure the link failed.
    pub async fn write_now(
        &self,
        link: &Link,
        head: impl FnOnce(&mut BytesMut) -> (MsgKind, u64),
        payload: &[u8],
    ) -> Result<u64> {
        let mut writer = self.lock_writer(link).await;
        // The header goes behind what is queued, in the queue's buffer,
        // its id taken under the queue's lock (ids follow the stream).
        let (out, kind, id, head_len) = {
            let mut q = self.queue.locked();
            let mut out = q.take(&self.state);
            let before = out.len();
            let (kind, id) = head(&mut out);
            let head_len = out.len() - before;
            (out, kind, id, head_len)
        };
        let bytes = head_len + payload.len();
        writer.write_or_fail(out, payload).await?;
        self.state.stats().sent(kind, bytes);
        self.state.activity().touch();
        Ok(id)
    }

    /// Writes what the queue holds now, instead of leaving it to the
    /// scheduled flush: whoever is about to wait for replies sends its
    /// requests itself, at no cost of a task switch. A failed write has
    /// failed the link and its ops.
    pub async fn flush(&self, link: &Link) {
        if !self.queue.locked().buf.is_empty() {
            self.write_queued(link, false).await;
        }
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.locked().buf.is_empty()
    }

    /// The link is lost: the flusher ends (what is still queued fails with
    /// the link, or [`Outbox::close`] writes it). Queued frames count as
    /// issued and sent, as they would once written.
    pub fn lost(&self) {
        self.queue.locked().tally.flush(self.state.stats());
        self.wake.notify_one();
    }

    /// Writes what is queued and finishes the stream, so that everything
    /// already written reaches the peer before the connection goes (the
    /// rank shuts down; its link is already failed).
    pub async fn close(&self) {
        let mut writer = self.writer.lock().await;
        let queued = self.queue.locked().take(&self.state);
        if let Some(mut w) = writer.take() {
            if !queued.is_empty() {
                let _ = write_after(&mut w, queued, &[]).await;
            }
            crate::peer::finish(&mut w).await;
        }
    }

    /// The link's flusher task: each scheduled flush writes what the queue
    /// holds until it finds it empty; the task ends once the link is lost.
    /// One task for the link's life, woken through `wake`, rather than a
    /// task spawned per scheduled flush: a spawn per op showed in a lone
    /// op's round trip (docs/PERFORMANCE.md).
    pub async fn flusher(link: Arc<Link>) {
        loop {
            link.outbox.wake.notified().await;
            if link.lost_reason().is_some() {
                return;
            }
            link.outbox.flush_scheduled(&link).await;
        }
    }

    /// One scheduled flush. Most find the queue already empty (whoever
    /// waits for its op has written it): that costs no writer lock.
    async fn flush_scheduled(&self, link: &Link) {
        loop {
            {
                let mut q = self.queue.locked();
                if q.buf.is_empty() {
                    q.scheduled = false;
                    return;
                }
            }
            if !self.write_queued(link, true).await {
                return;
            }
        }
    }

    /// Writes what the queue holds; whether it wrote (`false`: the queue
    /// was empty, or the write failed and failed the link). `scheduled`:
    /// the caller is the scheduled flush, which ends — clearing the mark
    /// under the queue's lock — when it finds nothing left.
    async fn write_queued(&self, link: &Link, scheduled: bool) -> bool {
        let mut writer = self.lock_writer(link).await;
        let queued = {
            let mut q = self.queue.locked();
            if q.buf.is_empty() {
                if scheduled {
                    q.scheduled = false;
                }
                writer.disarm();
                return false;
            }
            q.take(&self.state)
        };
        if writer.write_or_fail(queued, &[]).await.is_err() {
            // The link failed; later ops fail at once.
            self.queue.locked().scheduled = false;
            return false;
        }
        true
    }

    /// The writer, held until the guard goes.
    async fn lock_writer<'a>(&'a self, link: &'a Link) -> WriterGuard<'a> {
        WriterGuard {
            link,
            writer: self.writer.lock().await,
            armed: true,
        }
    }
}

/// Holds the writer while frames are written. If the caller is cancelled
/// in the middle, the stream holds half a frame and cannot carry another:
/// the guard drops the writer (the peer sees the stream end) and fails
/// the link.
struct WriterGuard<'a> {
    link: &'a Link,
    writer: tokio::sync::MutexGuard<'a, Option<PeerWriter>>,
    armed: bool,
}

impl WriterGuard<'_> {
    /// Lets the writer go untouched.
    fn disarm(&mut self) {
        self.armed = false;
    }

    /// Writes `queued` (frames, the last one's payload possibly apart),
    /// then `payload`. A peer that stops reading (cut off by a partition,
    /// hung) blocks the write once the socket's buffers fill, and TCP
    /// would wait for many minutes: after the op timeout the writer goes
    /// (the stream holds half a frame) and the link fails, as it does on
    /// any write error.
    async fn write_or_fail(&mut self, queued: BytesMut, payload: &[u8]) -> Result<()> {
        let link = self.link;
        let Some(writer) = self.writer.as_mut() else {
            self.armed = false;
            return Err(link.lost_or_reset());
        };
        let timeout = link.state.config().op_timeout;
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

/// Writes `buf` (frames, the last one's payload apart), then `payload`,
/// then flushes (TLS may hold the last record until then). A small payload
/// is copied behind the rest so that everything leaves in one write.
async fn write_after(w: &mut PeerWriter, mut buf: BytesMut, payload: &[u8]) -> std::io::Result<()> {
    if payload.len() <= COALESCE_MAX {
        buf.extend_from_slice(payload);
        w.write_all(&buf).await?;
    } else {
        w.write_all(&buf).await?;
        w.write_all(payload).await?;
    }
    w.flush().await
}
