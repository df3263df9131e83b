//! PutStream: the client's messages gathered into blocks, each put while
//! the next arrives.

use super::super::Error;
use super::super::budget::{Lease, Share};
use super::super::request::{Geometry, chunking, geometry, region_dtype, window};
use super::{Streams, block_bytes, block_transfers};
use bytes::{Bytes, BytesMut};
use pld_proto::Dtype;
use pld_proto::frame::Store;
use pld_proto::region::Chunking;
use pld_proto::v1::PutStreamRequest;
use pld_server::{Rank, WindowId};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::task::JoinHandle;
use tonic::Streaming;

/// Blocks of a PutStream being put while the next one fills.
const PUT_BLOCKS_IN_FLIGHT: usize = 2;

/// Put tasks of one stream; dropping it (the client went away) aborts them.
struct Inflight(VecDeque<JoinHandle<Result<u64, Error>>>);

impl Drop for Inflight {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

impl Inflight {
    async fn pop(&mut self) -> Option<Result<u64, Error>> {
        let h = self.0.pop_front()?;
        Some(
            h.await
                .unwrap_or_else(|e| Err(Error::Internal(format!("a put task failed: {e}")))),
        )
    }
}

async fn next(s: &mut Streaming<PutStreamRequest>) -> Result<Option<PutStreamRequest>, Error> {
    s.message()
        .await
        .map_err(|status| Error::client_stream("PutStream", status))
}

struct Target {
    rank: Arc<Rank>,
    peer: u32,
    win: WindowId,
    store: Store,
    g: Geometry,
    chunking: Chunking,
}

impl Target {
    fn spawn(
        self: &Arc<Self>,
        start: u64,
        bytes: Bytes,
        lease: Lease,
    ) -> JoinHandle<Result<u64, Error>> {
        let t = self.clone();
        tokio::spawn(async move {
            // Back to the budget once the block is put.
            let _lease = lease;
            for tr in block_transfers(&t.g, start, bytes.len() as u64, true) {
                match t.store {
                    Store::AtomicAdd { .. } => {
                        t.rank
                            .atomic_add_region(t.peer, t.win, &tr, &bytes, t.chunking)
                            .await?
                    }
                    Store::Put => {
                        t.rank
                            .put_region(t.peer, t.win, &tr, &bytes, t.chunking)
                            .await?
                    }
                }
            }
            Ok(bytes.len() as u64)
        })
    }
}

/// How long a PutStream's client may send nothing before the stream puts
/// the whole elements it gathered and gives its block's budget back: a
/// client that stalls half-way through a block then holds none of the
/// budget, and cannot starve the streams that move.
const IDLE_FLUSH: Duration = Duration::from_millis(200);

/// The bytes a PutStream gathered and has in flight.
struct Gather<'a> {
    target: Arc<Target>,
    streams: &'a Streams,
    block: u64,
    acc: BytesMut,
    /// The budget for the block being gathered: a whole block's worth,
    /// taken before its first byte is (so a spent budget stops reading
    /// the client).
    lease: Option<Lease>,
    inflight: Inflight,
    /// Bytes handed to put tasks, and those the finished tasks wrote.
    flushed: u64,
    applied: u64,
}

impl Gather<'_> {
    /// Budget for `bytes`: the stream's first block is its start; later
    /// ones come because the client sent more.
    async fn take(&self, bytes: usize) -> Lease {
        let share = if self.flushed == 0 {
            Share::Start
        } else {
            Share::Moving
        };
        self.streams.budget.take(bytes, share).await
    }

    /// Gathers `data`, putting every block it completes.
    async fn add(&mut self, data: &[u8]) -> Result<(), Error> {
        if !data.is_empty() && self.lease.is_none() {
            self.lease = Some(self.take(self.block as usize).await);
        }
        self.acc.extend_from_slice(data);
        while self.acc.len() as u64 >= self.block {
            self.flush(self.block as usize, true).await?;
        }
        Ok(())
    }

    /// Puts the first `n` bytes gathered (whole elements); with `refill`,
    /// takes the budget for the next block if bytes of it are here.
    async fn flush(&mut self, n: usize, refill: bool) -> Result<(), Error> {
        // At most two in flight: this one waits (holding its bytes) for the
        // oldest, and the client is not read meanwhile.
        while self.inflight.0.len() >= PUT_BLOCKS_IN_FLIGHT {
            if let Some(r) = self.inflight.pop().await {
                self.applied += r?;
            }
        }
        let bytes = self.acc.split_to(n).freeze();
        let lease = match self.lease.take() {
            Some(l) => l,
            None => self.take(n).await,
        };
        let task = self.target.spawn(self.flushed, bytes, lease);
        self.inflight.0.push_back(task);
        self.flushed += n as u64;
        if refill && !self.acc.is_empty() {
            self.lease = Some(self.take(self.block as usize).await);
        }
        Ok(())
    }

    /// The client went quiet: puts the whole elements gathered, and holds
    /// no budget while it waits (what is left is less than one element).
    async fn flush_idle(&mut self) -> Result<(), Error> {
        let elem = self.target.g.dtype.size();
        let n = self.acc.len() / elem * elem;
        if n > 0 {
            self.flush(n, false).await?;
        }
        self.lease = None;
        Ok(())
    }

    /// Puts what is left and waits for every put.
    async fn finish(mut self) -> Result<(), Error> {
        if !self.acc.is_empty() {
            let n = self.acc.len();
            self.flush(n, false).await?;
        }
        while let Some(r) = self.inflight.pop().await {
            r?;
        }
        Ok(())
    }

    /// Waits for the puts in flight; the bytes written in all.
    async fn drain(&mut self) -> u64 {
        while let Some(r) = self.inflight.pop().await {
            self.applied += r.unwrap_or(0);
        }
        self.applied
    }
}

/// Runs a PutStream to completion: checks the header, then puts block
/// after block as the bytes arrive.
pub(crate) async fn put(
    rank: Arc<Rank>,
    mut s: Streaming<PutStreamRequest>,
    streams: &Streams,
) -> Result<(), Error> {
    const CALL: &str = "PutStream";
    let first = next(&mut s).await?.ok_or_else(|| {
        Error::invalid(
            CALL,
            "the stream is empty: its first message must carry the header",
        )
    })?;
    let h = first
        .header
        .ok_or_else(|| Error::invalid(CALL, "the first message carries no header"))?;
    let win = window(&rank, &h.window)?;
    if h.atomic_add && h.region.is_none() {
        return Err(Error::invalid(
            CALL,
            "atomic_add needs a region: its dtype says how to add",
        ));
    }
    let dtype = region_dtype(CALL, h.region.as_ref(), Dtype::Int8)?;
    let store = match h.atomic_add {
        true => Store::add(dtype),
        false => Store::Put,
    };
    let g = geometry(CALL, dtype, h.offset, h.region.as_ref(), h.len)?;
    let chunking = chunking(h.chunking.as_ref());
    // Everything is checked before the first byte lands.
    rank.check_transfer(store.op(), h.rank, win, &g.store(), &chunking)?;
    let expected = g.packed_len;
    let mut gather = Gather {
        block: block_bytes(&g, &chunking),
        target: Arc::new(Target {
            rank,
            peer: h.rank,
            win,
            store,
            g,
            chunking,
        }),
        streams,
        acc: BytesMut::new(),
        lease: None,
        inflight: Inflight(VecDeque::new()),
        flushed: 0,
        applied: 0,
    };
    let length = |got: u64, applied: u64| Error::StreamLength {
        rank: h.rank,
        expected,
        got,
        applied,
    };
    let mut received = 0u64;
    let mut data = first.data;
    loop {
        received += data.len() as u64;
        if received > expected {
            // Stop at once: the client is sending more than it said.
            return Err(length(received, gather.drain().await));
        }
        gather.add(&data).await?;
        let message = match tokio::time::timeout(IDLE_FLUSH, next(&mut s)).await {
            Ok(m) => m?,
            Err(_) => {
                gather.flush_idle().await?;
                let stall = streams.stall_timeout;
                match tokio::time::timeout(stall.saturating_sub(IDLE_FLUSH), next(&mut s)).await {
                    Ok(m) => m?,
                    Err(_) => {
                        streams.metrics.stalled.fetch_add(1, Ordering::Relaxed);
                        return Err(Error::PutStalled {
                            rank: h.rank,
                            stall,
                            expected,
                            got: received,
                            applied: gather.drain().await,
                        });
                    }
                }
            }
        };
        match message {
            Some(m) if m.header.is_some() => {
                return Err(Error::invalid(
                    CALL,
                    "only the first message carries a header",
                ));
            }
            Some(m) => data = m.data,
            None if received != expected => {
                return Err(length(received, gather.drain().await));
            }
            None => return gather.finish().await,
        }
    }
}
