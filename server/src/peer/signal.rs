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
use pld_proto::MsgKind;
use pld_proto::barrier::Signal;
use pld_proto::lock::Locked;
use pld_proto::v1::{BarrierSignal, CheckedStamp, Header, header::Body};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The write side of one served connection: its serve task writes replies
/// through it, and the barrier, for a peer of lower rank, its signals.
///
/// Whoever writes takes the writer out ([`Lease`]) and puts it back when
/// done, under a plain lock held only for the exchange: the serve task's
/// writes cost two uncontended lock round trips (a `tokio::sync::Mutex`
/// cost a lone put ~290 instructions, callgrind). The serve task waits
/// while a signal is out on the connection; the barrier never waits: it
/// signals on its link instead.
#[derive(Debug)]
pub(crate) struct ServedWriter {
    /// The peer's run (its Hello's epoch) the connection comes from.
    epoch: u64,
    writes_raw: bool,
    slot: Mutex<WriterSlot>,
    /// Rung when the writer comes back and the serve task waits for it.
    back: Notify,
}

#[derive(Debug)]
struct WriterSlot {
    holder: Holder,
    /// The serve task waits for the writer to come back.
    waiting: bool,
}

/// Where a served connection's writer is.
#[derive(Debug)]
enum Holder {
    Here(PeerWriter),
    /// Lent out: a write is in progress.
    Out,
    /// A write failed or was cancelled half-way: the stream may hold half
    /// a frame, and nothing more may be written on it.
    Gone,
}

/// Why a served connection's writer is gone.
fn gone() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "a write on this connection failed",
    )
}

/// The writer, taken out for one write: [`Lease::done`] puts it back; a
/// lease dropped without (a failed or cancelled write) leaves it gone.
struct Lease<'a> {
    from: &'a ServedWriter,
    w: Option<PeerWriter>,
}

impl Lease<'_> {
    fn writer(&mut self) -> std::io::Result<&mut PeerWriter> {
        self.w.as_mut().ok_or_else(gone)
    }

    fn done(mut self) {
        if let Some(w) = self.w.take() {
            self.from.put(Holder::Here(w));
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if self.w.take().is_some() {
            self.from.put(Holder::Gone);
        }
    }
}

impl ServedWriter {
    pub fn new(writer: PeerWriter, epoch: u64) -> Arc<ServedWriter> {
        Arc::new(ServedWriter {
            epoch,
            writes_raw: writer.writes_raw(),
            slot: Mutex::new(WriterSlot {
                holder: Holder::Here(writer),
                waiting: false,
            }),
            back: Notify::new(),
        })
    }

    /// Whether the transport writes from raw memory (see
    /// [`PeerWriter::writes_raw`]).
    pub fn writes_raw(&self) -> bool {
        self.writes_raw
    }

    /// The writer if it is here now (`None` while a write is out, or once
    /// it is gone).
    fn try_lease(&self) -> Option<Lease<'_>> {
        let mut s = self.slot.locked();
        match std::mem::replace(&mut s.holder, Holder::Out) {
            Holder::Here(w) => Some(Lease {
                from: self,
                w: Some(w),
            }),
            other => {
                s.holder = other;
                None
            }
        }
    }

    /// The writer, waiting while a barrier signal is out on it. (The
    /// writes on the data path try [`ServedWriter::try_lease`] first: the
    /// writer is nearly always here, and a future costs.)
    #[cold]
    async fn lease(&self) -> std::io::Result<Lease<'_>> {
        loop {
            {
                let mut s = self.slot.locked();
                match std::mem::replace(&mut s.holder, Holder::Out) {
                    Holder::Here(w) => {
                        return Ok(Lease {
                            from: self,
                            w: Some(w),
                        });
                    }
                    Holder::Out => s.waiting = true,
                    Holder::Gone => {
                        s.holder = Holder::Gone;
                        return Err(gone());
                    }
                }
            }
            // `notify_one` keeps a permit if it comes before this wait.
            self.back.notified().await;
        }
    }

    fn put(&self, holder: Holder) {
        let mut s = self.slot.locked();
        s.holder = holder;
        if std::mem::take(&mut s.waiting) {
            drop(s);
            self.back.notify_one();
        }
    }

    /// Writes `bytes` and flushes them.
    pub async fn write_all(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut lease = match self.try_lease() {
            Some(lease) => lease,
            None => self.lease().await?,
        };
        let w = lease.writer()?;
        w.write_all(bytes).await?;
        w.flush().await?;
        lease.done();
        Ok(())
    }

    /// Writes rows straight from raw memory (a window's).
    pub async fn write_raw_all(&self, rows: impl Iterator<Item = Raw>) -> std::io::Result<()> {
        let mut lease = match self.try_lease() {
            Some(lease) => lease,
            None => self.lease().await?,
        };
        let w = lease.writer()?;
        for raw in rows {
            w.write_raw_all(raw).await?;
        }
        lease.done();
        Ok(())
    }

    /// Ends the write side (see [`super::finish`]).
    pub async fn finish(&self) {
        if let Ok(mut lease) = self.lease().await
            && let Ok(w) = lease.writer()
        {
            super::finish(w).await;
        }
    }

    /// Closes the write side without waiting for the peer.
    pub async fn shutdown(&self) {
        if let Ok(mut lease) = self.lease().await
            && let Ok(w) = lease.writer()
        {
            let _ = w.shutdown().await;
            lease.done();
        }
    }

    /// Writes one barrier signal if the writer is here now (`None`: it is
    /// not); the bytes written.
    async fn signal(&self, header: &Header) -> Option<std::io::Result<usize>> {
        let mut lease = self.try_lease()?;
        let written = match lease.writer() {
            Ok(w) => super::write_frame(w, header, &[]).await,
            Err(e) => Err(e),
        };
        if written.is_ok() {
            lease.done();
        }
        Some(written)
    }
}

/// The served connections of lower-ranked peers, by rank: where this rank
/// signals them.
#[derive(Debug)]
pub(crate) struct Served {
    slots: Vec<Mutex<Entry>>,
}

#[derive(Debug, Default)]
struct Entry {
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
/// `epoch`; whether it did. Otherwise — also while the serve task is
/// writing on that connection, or if the write fails or makes no progress
/// before `deadline` — the caller sends it on its own link.
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
    let body = Body::Barrier(BarrierSignal {
        epoch: s.epoch,
        round: s.round,
    });
    let header = Header {
        id: 0,
        checked: state.checked.as_ref().map(|c| c.stamp_for(&body)),
        body: Some(body),
    };
    match tokio::time::timeout_at(deadline, w.signal(&header)).await {
        Ok(Some(Ok(n))) => {
            state.stats.sent(MsgKind::Barrier, n);
            state.activity.touch();
            return true;
        }
        Ok(None) => tracing::debug!(to = s.to, "barrier signal: the served connection is busy"),
        Ok(Some(Err(e))) => {
            tracing::debug!(to = s.to, error = %e, "barrier signal: the served connection failed")
        }
        Err(_) => tracing::debug!(
            to = s.to,
            "barrier signal: the served connection made no progress"
        ),
    }
    false
}

/// A barrier signal heard from `from` (on any connection of that rank):
/// the state machine takes it, and the barrier task looks again.
pub(crate) fn heard(
    state: &RankState,
    from: u32,
    signal: &BarrierSignal,
    checked: Option<&CheckedStamp>,
) {
    let accepted = {
        let mut barrier = state.barrier.locked();
        let accepted = barrier.on_message(from, signal.epoch, signal.round);
        // Its clock only once the state machine took it (an epoch far
        // ahead, a duplicate, a wrong sender are dropped whole), and under
        // the barrier's lock, so that the barrier cannot finish the epoch
        // between the two.
        if accepted.is_ok()
            && let (Some(c), Some(s)) = (&state.checked, checked)
        {
            c.barrier_heard(signal.epoch, s);
        }
        accepted
    };
    match accepted {
        Ok(()) => state.barrier_wake.notify_waiters(),
        Err(e) => {
            state.stats.frame_error();
            if let Some(more) = state.barrier_ignored.admit() {
                tracing::warn!(peer = from, "ignored a barrier message: {e}{more}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A served writer over one end of a loopback TCP pair, that end's
    /// read half (held, so the socket stays open), and the other end.
    async fn served() -> (
        Arc<ServedWriter>,
        tokio::net::tcp::OwnedReadHalf,
        tokio::net::TcpStream,
    ) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = tokio::net::TcpStream::connect(l.local_addr().unwrap());
        let (a, b) = tokio::join!(a, l.accept());
        let (r, w) = a.unwrap().into_split();
        (ServedWriter::new(PeerWriter::Tcp(w), 1), r, b.unwrap().0)
    }

    #[tokio::test]
    async fn the_serve_task_waits_while_a_signal_is_out_and_writes_after_it() {
        let (w, _r, mut peer) = served().await;
        let mut out = w.try_lease().expect("the writer is here");
        // Out: the barrier finds it busy, the serve task waits.
        assert!(w.try_lease().is_none());
        let reply = tokio::spawn({
            let w = w.clone();
            async move { w.write_all(b"reply").await }
        });
        tokio::task::yield_now().await;
        assert!(
            !reply.is_finished(),
            "the reply was written behind the signal's back"
        );
        out.writer().unwrap().write_all(b"signal").await.unwrap();
        out.done();
        reply.await.unwrap().unwrap();
        let mut got = [0u8; 11];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"signalreply");
    }

    #[tokio::test]
    async fn a_write_that_does_not_finish_leaves_the_connection_unwritable() {
        let (w, _r, _peer) = served().await;
        drop(w.try_lease().expect("the writer is here"));
        assert!(w.try_lease().is_none());
        let e = w.write_all(b"reply").await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
    }
}
