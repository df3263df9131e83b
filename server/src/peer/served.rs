//! The write side of a served connection (one a peer dialed): its serve
//! task writes replies through it, and the barrier, to a peer of lower
//! rank, its signals (see `peer::signal`).

use crate::transport::{PeerWriter, Raw};
use pld_proto::lock::Locked;
use pld_proto::v1::Header;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

/// The write side of one served connection: its serve task writes replies
/// through it, and the barrier, for a peer of lower rank, its signals.
///
/// Whoever writes takes the writer out ([`Lease`]) and puts it back when
/// done, under a plain lock held only for the exchange: the serve task's
/// writes cost two uncontended lock round trips, where an async mutex
/// cost every reply a future (docs/PERFORMANCE.md). The serve task waits
/// while a signal is out on the connection; the barrier never waits: it
/// signals on its link instead.
#[derive(Debug)]
pub(crate) struct ServedWriter {
    /// The peer's run (its Hello's epoch) the connection comes from.
    pub(crate) epoch: u64,
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
    pub(crate) async fn signal(&self, header: &Header) -> Option<std::io::Result<usize>> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::transport::PeerWriter;
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
