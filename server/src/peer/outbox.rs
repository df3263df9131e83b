//! Coalescing on the origin side: request frames issued back to back to one
//! peer share writes.
//!
//! A small non-blocking op does not write its frame itself: it encodes the
//! frame into the link's [`Outbox`] (taking its id under the same lock, so
//! ids follow the order of the bytes on the stream) and, if no flush is
//! scheduled, schedules one — a task that takes everything queued by the
//! time it runs and writes it in one go. Nothing waits for company: there
//! is no timer, the flush is scheduled at once, and what it sends is what
//! was already queued. A program that issues 64 puts without yielding has
//! all 64 in the outbox when the flush runs (one write, one cumulative
//! acknowledgement back); a lone op is written as soon as its caller
//! yields — to wait for it, to `quiet`, or for anything else.
//!
//! A frame that is written directly (a blocking barrier signal, a payload
//! too large to copy) first takes what the outbox holds, so the stream
//! keeps issue order. Lock order: the writer, then the outbox, then the
//! op table.

use super::link::{Link, Waiter};
use crate::error::Result;
use crate::transport::PeerWriter;
use bytes::BytesMut;
use pld_proto::MsgKind;
use pld_proto::lock::Locked;
use pld_proto::track::PeerOps;
use pld_proto::v1::{Header, header::Body};
use std::sync::Arc;
use std::time::Instant;
use tokio::io::AsyncWriteExt;

/// Payloads up to this size are copied into the outbox (or behind their
/// header) so that their frame leaves with its neighbours; larger ones are
/// written from the caller's buffer.
pub(crate) const COALESCE_MAX: usize = 16 * 1024;

/// Once this much is queued, the issuing caller writes it itself: a
/// program that issues ops without ever yielding does not grow the outbox
/// without bound. (Writing earlier, to let the target start on the first
/// part of a run while the rest is issued, measured slower: a loopback
/// send costs the sender the receiver's TCP processing too. See
/// docs/PERFORMANCE.md, "Small-op message rate".)
const WRITE_AT: usize = 64 * 1024;

/// Frames encoded but not yet written, and whether a flush is scheduled.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    pub(super) buf: BytesMut,
    pub(super) scheduled: bool,
    /// The issue time of the frames queued since the outbox was last
    /// empty, and how many have shared it: ops queued together share their
    /// issue time (one look at the clock, not one per op), for at most
    /// `STAMP_SHARED` of them.
    stamp: Option<(Instant, u32)>,
}

/// How many queued ops share one look at the clock.
const STAMP_SHARED: u32 = 64;

impl Outbox {
    /// The issue time of a frame queued now.
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

    /// Takes every queued byte (the flush that calls this writes them).
    pub(super) fn take(&mut self) -> BytesMut {
        self.buf.split()
    }
}

impl Link {
    /// Issues one frame. A small one is queued in the outbox behind any
    /// others and a flush scheduled (see `outbox`); a large one is written
    /// at once, after what is queued. `id` picks the frame's id with the
    /// outbox locked — so a caller cancelled before that has recorded
    /// nothing, and ids follow the order of the frames on the stream.
    pub(super) async fn write(
        self: &Arc<Self>,
        body: Body,
        payload: &[u8],
        id: impl FnOnce(&mut PeerOps<Waiter>, Instant) -> u64,
    ) -> Result<u64> {
        if let Some(e) = self.lost_error() {
            return Err(e);
        }
        if payload.len() > COALESCE_MAX {
            return self.write_now(body, payload, id).await;
        }
        let (id, full) = {
            let mut outbox = self.outbox.locked();
            let now = outbox.stamp();
            let header = self.header(body, |ops| id(ops, now));
            let before = outbox.buf.len();
            pld_proto::frame::encode_head(&header, payload.len(), &mut outbox.buf);
            outbox.buf.extend_from_slice(payload);
            self.sent(&header, outbox.buf.len() - before);
            if !outbox.scheduled {
                outbox.scheduled = true;
                self.runtime.spawn(flush_queued(self.clone()));
            }
            (header.id, outbox.buf.len() >= WRITE_AT)
        };
        if full {
            self.flush().await;
        }
        Ok(id)
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
        let (queued, header) = {
            let mut outbox = self.outbox.locked();
            (
                outbox.take(),
                self.header(body, |ops| id(ops, Instant::now())),
            )
        };
        let mut head = BytesMut::with_capacity(64);
        pld_proto::frame::encode_head(&header, payload.len(), &mut head);
        writer.write_or_fail(queued, &head, payload).await?;
        self.sent(&header, head.len() + payload.len());
        Ok(header.id)
    }

    /// Writes what the outbox holds now, instead of leaving it to the
    /// scheduled flush: whoever is about to wait for replies sends its
    /// requests itself, at no cost of a task switch. (Cancelled in the
    /// middle of the write, it fails the link, as any half-written frame
    /// does.) A failed write has failed the link and its ops.
    pub async fn flush(&self) {
        if self.outbox.locked().buf.is_empty() {
            return;
        }
        let mut writer = self.lock_writer().await;
        let queued = self.outbox.locked().take();
        if queued.is_empty() {
            writer.disarm();
        } else {
            let _ = writer.write_or_fail(queued, &[], &[]).await;
        }
    }

    /// The header of a request about to be queued or written: its id
    /// (taken now), and in checked mode this rank's clock (for a barrier
    /// signal, the join of what it heard of that barrier).
    fn header(&self, body: Body, id: impl FnOnce(&mut PeerOps<Waiter>) -> u64) -> Header {
        let id = {
            let mut ops = self.ops();
            let id = id(&mut ops);
            self.spin_for_replies(&ops);
            id
        };
        let checked = self.state.checked.as_ref().map(|c| match &body {
            Body::Barrier(b) => c.barrier_stamp(b.epoch),
            b => c.stamp_request(b),
        });
        Header {
            id,
            body: Some(body),
            checked,
        }
    }

    fn sent(&self, header: &Header, bytes: usize) {
        self.state.stats.sent(MsgKind::of(header), bytes);
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

    /// Writes `queued`, then `head` + `payload`. A peer that stops reading
    /// (cut off by a partition, hung) blocks the write once the socket's
    /// buffers fill, and TCP would wait for many minutes: after the op
    /// timeout the writer goes (the stream holds half a frame) and the
    /// link fails, as it does on any write error.
    pub(super) async fn write_or_fail(
        &mut self,
        queued: BytesMut,
        head: &[u8],
        payload: &[u8],
    ) -> Result<()> {
        let link = self.link;
        let Some(writer) = self.writer.as_mut() else {
            self.armed = false;
            return Err(link.lost_or_reset());
        };
        let timeout = link.state.config.op_timeout;
        let written = match tokio::time::timeout(
            timeout,
            write_after(writer, queued, head, payload),
        )
        .await
        {
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

/// Writes `queued`, then the frame `head` + `payload`, then flushes (TLS
/// may hold the last record until then). Small payloads are copied behind
/// their header so that everything leaves in one write.
pub(super) async fn write_after(
    w: &mut PeerWriter,
    mut queued: BytesMut,
    head: &[u8],
    payload: &[u8],
) -> std::io::Result<()> {
    if payload.len() <= COALESCE_MAX {
        queued.extend_from_slice(head);
        queued.extend_from_slice(payload);
        w.write_all(&queued).await?;
    } else {
        queued.extend_from_slice(head);
        w.write_all(&queued).await?;
        w.write_all(payload).await?;
    }
    w.flush().await
}

/// The scheduled flush: writes what the outbox holds until it finds it
/// empty. A write that fails or makes no progress for the op timeout fails
/// the link (every outstanding op with it).
pub(super) async fn flush_queued(link: Arc<Link>) {
    loop {
        let mut writer = link.lock_writer().await;
        let queued = {
            let mut outbox = link.outbox.locked();
            if outbox.buf.is_empty() {
                outbox.scheduled = false;
                writer.disarm();
                return;
            }
            outbox.take()
        };
        if writer.write_or_fail(queued, &[], &[]).await.is_err() {
            // The link failed; later ops fail at once.
            link.outbox.locked().scheduled = false;
            return;
        }
    }
}
