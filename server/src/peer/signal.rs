//! Barrier signals: the connection that carries them, and what a rank does
//! with one it hears.
//!
//! Two ranks share two connections, one dialed by each: a request travels
//! on its origin's link and is answered on it, so a link carries data both
//! ways. A barrier signal is one-way. Sent on its sender's link, each of a
//! pair's signals would travel on a connection that carries data one way
//! only, and TCP then acknowledges it with a packet of its own (Linux: at
//! least every second small segment, at once, from the receiver's `recv`),
//! where data going the other way carries the acknowledgement for free. On
//! loopback that packet costs the receiving rank a transmit and the sending
//! rank a receive, each through the whole stack: two processes exchanging
//! 13-byte messages over a connection each way took 1.4–1.5x as long as
//! over one connection both ways (`scripts/pair-exchange.c`;
//! docs/PERFORMANCE.md, "Round two, twelfth pass").
//!
//! So a pair's signals go both ways on the connection the *lower* rank of
//! the two dialed: the lower rank signals on its link, the higher one on
//! its served connection from the lower ([`Served`] holds the write side
//! of each), and each hears the other where it writes. The path is only a
//! preference: until the lower rank has dialed, after the connection
//! broke, or while the peer rejoins, the higher rank signals on its own
//! link, and a rank hears signals on either connection — the barrier's
//! state machine takes each once, in any order.
//!
//! In round k rank r signals r + 2^k and hears r − 2^k, so at larger P
//! most pairs still signal one way only (at a power of two, both ways only
//! in the last round), and the saving is largest at small P: TCP segments
//! per barrier 3.0 → 2.0 at P = 2, 12.1 → 10.8 at 4, 38.5 → 37.1 at 8.

use super::RankState;
use crate::transport::{PeerWriter, Raw};
use bytes::BytesMut;
use pld_proto::MsgKind;
use pld_proto::barrier::Signal;
use pld_proto::lock::Locked;
use pld_proto::v1::{BarrierSignal, CheckedStamp, Header, header::Body};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

/// The write side of one served connection: its serve task writes replies
/// through it, and the barrier, for a peer of lower rank, its signals.
#[derive(Debug)]
pub(crate) struct ServedWriter {
    /// The peer's run (its Hello's epoch) the connection comes from.
    epoch: u64,
    /// `None` once a signal's write failed or was cancelled half-way: the
    /// stream may hold half a frame, and the serve task's next write ends
    /// the connection.
    writer: tokio::sync::Mutex<Option<PeerWriter>>,
    writes_raw: bool,
}

/// Why a served connection's writer is gone.
fn gone() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "a barrier signal's write on this connection failed",
    )
}

impl ServedWriter {
    pub fn new(writer: PeerWriter, epoch: u64) -> Arc<ServedWriter> {
        Arc::new(ServedWriter {
            epoch,
            writes_raw: writer.writes_raw(),
            writer: tokio::sync::Mutex::new(Some(writer)),
        })
    }

    /// Whether the transport writes from raw memory (see
    /// [`PeerWriter::writes_raw`]).
    pub fn writes_raw(&self) -> bool {
        self.writes_raw
    }

    /// Writes `bytes` and flushes them.
    pub async fn write_all(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut slot = self.writer.lock().await;
        let w = slot.as_mut().ok_or_else(gone)?;
        w.write_all(bytes).await?;
        w.flush().await
    }

    /// Writes rows straight from raw memory (a window's).
    pub async fn write_raw_all(&self, rows: impl Iterator<Item = Raw>) -> std::io::Result<()> {
        let mut slot = self.writer.lock().await;
        let w = slot.as_mut().ok_or_else(gone)?;
        for raw in rows {
            w.write_raw_all(raw).await?;
        }
        Ok(())
    }

    /// Ends the write side (see [`super::finish`]).
    pub async fn finish(&self) {
        if let Some(w) = self.writer.lock().await.as_mut() {
            super::finish(w).await;
        }
    }

    /// Closes the write side without waiting for the peer.
    pub async fn shutdown(&self) {
        if let Some(w) = self.writer.lock().await.as_mut() {
            let _ = w.shutdown().await;
        }
    }

    /// Writes one signal frame. The writer is taken out while it writes: a
    /// write that fails or is cancelled half-way leaves it gone, so that
    /// nothing is written behind half a frame.
    async fn signal(&self, frame: &[u8]) -> std::io::Result<()> {
        let mut slot = self.writer.lock().await;
        let mut w = slot.take().ok_or_else(gone)?;
        w.write_all(frame).await?;
        w.flush().await?;
        *slot = Some(w);
        Ok(())
    }
}

/// The served connections of lower-ranked peers, by rank: where this rank
/// signals them.
#[derive(Debug)]
pub(crate) struct Served {
    slots: Vec<Mutex<Slot>>,
}

#[derive(Debug, Default)]
struct Slot {
    now: Option<Arc<ServedWriter>>,
    /// Whether the peer had a served connection before this one.
    before: bool,
}

impl Served {
    pub fn new(nranks: usize) -> Served {
        Served {
            slots: (0..nranks).map(|_| Mutex::default()).collect(),
        }
    }

    /// Makes `w` the connection to signal `peer` on. Whether it follows an
    /// earlier one, which may have taken signals with it when it went.
    pub fn register(&self, peer: u32, w: &Arc<ServedWriter>) -> bool {
        let Some(s) = self.slots.get(peer as usize) else {
            return false;
        };
        let mut s = s.locked();
        s.now = Some(w.clone());
        std::mem::replace(&mut s.before, true)
    }

    /// Forgets `w` (a connection that ended), unless a newer one of the
    /// peer has taken its place.
    pub fn deregister(&self, peer: u32, w: &Arc<ServedWriter>) {
        if let Some(s) = self.slots.get(peer as usize) {
            let mut s = s.locked();
            if s.now.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, w)) {
                s.now = None;
            }
        }
    }

    fn get(&self, peer: u32) -> Option<Arc<ServedWriter>> {
        self.slots.get(peer as usize)?.locked().now.clone()
    }
}

/// Sends `s` on the connection the lower of the two ranks dialed, if this
/// rank is the higher one and that connection is to the peer's run
/// `epoch`; whether it did. Otherwise, or if the write fails or cannot
/// start before `deadline`, the caller sends it on its own link.
pub(crate) async fn send_served(
    state: &RankState,
    s: Signal,
    epoch: u64,
    deadline: Instant,
) -> bool {
    let Some(w) = (s.to < state.config.rank)
        .then(|| state.served.get(s.to))
        .flatten()
        .filter(|w| w.epoch == epoch)
    else {
        return false;
    };
    let header = Header {
        id: 0,
        body: Some(Body::Barrier(BarrierSignal {
            epoch: s.epoch,
            round: s.round,
        })),
        checked: state.checked.as_ref().map(|c| c.barrier_stamp(s.epoch)),
    };
    let mut frame = BytesMut::new();
    pld_proto::frame::encode_head(&header, 0, &mut frame);
    match tokio::time::timeout_at(deadline, w.signal(&frame)).await {
        Ok(Ok(())) => {
            state.stats.sent(MsgKind::Barrier, frame.len());
            state.activity.touch();
            true
        }
        Ok(Err(e)) => {
            tracing::debug!(to = s.to, error = %e, "barrier signal: the served connection failed; on the link instead");
            false
        }
        Err(_) => {
            tracing::debug!(
                to = s.to,
                "barrier signal: the served connection stayed busy; on the link instead"
            );
            false
        }
    }
}

/// A barrier signal heard from `from` (on any connection of that rank):
/// the state machine takes it, and the barrier task looks again.
pub(crate) fn heard(
    state: &RankState,
    from: u32,
    signal: &BarrierSignal,
    checked: Option<&CheckedStamp>,
) {
    if let (Some(c), Some(s)) = (&state.checked, checked) {
        c.barrier_heard(signal.epoch, s);
    }
    let accepted = state
        .barrier
        .locked()
        .on_message(from, signal.epoch, signal.round);
    match accepted {
        Ok(()) => state.barrier_wake.notify_waiters(),
        Err(e) => {
            state.stats.frame_error();
            tracing::warn!(peer = from, "ignored a barrier message: {e}");
        }
    }
}
