//! Coalescing on the origin side: request frames issued back to back to one
//! peer share writes.
//!
//! A small non-blocking op does not write its frame itself: it encodes the
//! frame into the link's [`Outbox`] (taking its id under the same lock, so
//! ids follow the order of the bytes on the stream) and, if no flush is
//! scheduled, schedules one — wakes the link's flusher task, which takes
//! everything queued by the time it runs and writes it in one go. Nothing
//! waits for company: there is no timer, the flush is scheduled at once,
//! and what it sends is what was already queued. A program that issues 64 puts without yielding has
//! all 64 in the outbox when the flush runs (one write, one cumulative
//! acknowledgement back); a lone op is written as soon as its caller
//! yields — to wait for it, to `quiet`, or for anything else.
//!
//! A frame that is written directly (a blocking barrier signal, a payload
//! too large to copy) first takes what the outbox holds, so the stream
//! keeps issue order. Lock order: the writer, then the outbox, then the
//! op table.
//!
//! This module holds the outbox and the write itself; the link's side —
//! queueing, scheduling, the flusher task, the guard that fails a link whose
//! write was cancelled half way — is `peer::link::send`.

use super::RankState;
use crate::stats::SentTally;
use crate::transport::PeerWriter;
use bytes::BytesMut;
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
pub(crate) const WRITE_AT: usize = 64 * 1024;

/// Frames encoded but not yet written, and whether a flush is scheduled.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    pub(crate) buf: BytesMut,
    pub(crate) scheduled: bool,
    /// The queued frames' counts, added to the rank's when they are taken.
    pub(crate) tally: SentTally,
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
    pub(crate) fn stamp(&mut self) -> Instant {
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

    /// Takes every queued byte (the flush that calls this writes them),
    /// and counts their frames as sent.
    pub(crate) fn take(&mut self, state: &RankState) -> BytesMut {
        state.activity.touch_n(self.tally.flush(&state.stats));
        self.buf.split()
    }
}

/// Writes `buf` (frames, the last one's payload apart), then `payload`,
/// then flushes (TLS may hold the last record until then). A small payload
/// is copied behind the rest so that everything leaves in one write.
pub(crate) async fn write_after(
    w: &mut PeerWriter,
    mut buf: BytesMut,
    payload: &[u8],
) -> std::io::Result<()> {
    if payload.len() <= COALESCE_MAX {
        buf.extend_from_slice(payload);
        w.write_all(&buf).await?;
    } else {
        w.write_all(&buf).await?;
        w.write_all(payload).await?;
    }
    w.flush().await
}
