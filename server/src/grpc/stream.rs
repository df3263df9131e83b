//! `PutStream` and `GetStream`: regions of any size through bounded memory.
//!
//! A PutStream gathers the client's messages into blocks of about 8 MiB
//! (whole rows, and whole multiples of `chunk_rows` rows where that fits,
//! so that the chunks on the peer plane are the ones a single transfer
//! would send) and puts each while the next arrives — at most two blocks in
//! flight. A GetStream reads 128 KiB messages a few ahead of what the
//! client has taken, and no further: when the client stops reading, the
//! stream stops reading the window. No transfer is ever held whole.
//!
//! Both draw what they buffer from the daemon-wide budget
//! ([`super::budget`]) and wait when it is spent. A GetStream whose client
//! takes nothing for the stall timeout is cancelled: the client finds a
//! DEADLINE_EXCEEDED status after the data it had not read, and if it does
//! not read that either within another stall timeout, its connection is
//! closed (HTTP/2 cannot reach a client whose window is shut).

use super::Error;
use super::budget::{Budget, Lease};
use super::incoming::ClientInfo;
use super::request::{Geometry, chunking, geometry, region_dtype, window};
use crate::rank::{Rank, WindowId};
use bytes::{Bytes, BytesMut};
use pld_proto::region::{Chunking, Layout, Transfer, packed_pieces};
use pld_proto::v1::{GetStreamRequest, GetStreamResponse, PutStreamRequest};
use pld_proto::{Dtype, OpKind};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tonic::{Status, Streaming};

/// About how many bytes one block holds.
const BLOCK: u64 = 8 << 20;
/// The most data in one GetStream message: small, so that what a stalled
/// client leaves in gRPC's own buffers (about two messages) stays small.
pub(crate) const GET_MESSAGE: usize = 128 << 10;
/// GetStream messages read ahead of what the client has taken.
const GET_AHEAD: usize = 4;

/// What the streams share: the budget, and when a client counts as stalled.
#[derive(Debug, Clone)]
pub(crate) struct Streams {
    pub budget: Budget,
    pub stall_timeout: Duration,
    pub metrics: Arc<super::GrpcMetrics>,
}

/// The response stream of GetStream: messages the producer read ahead.
/// Each message taken makes room for the producer to read one more.
pub(crate) struct GetStream {
    rx: mpsc::Receiver<Result<GetStreamResponse, Status>>,
    room: Arc<Semaphore>,
    /// Budget for what gRPC itself buffers of this stream (about two
    /// messages), held while the stream lives.
    _downstream: Lease,
}

impl std::fmt::Debug for GetStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetStream").finish_non_exhaustive()
    }
}

impl tokio_stream::Stream for GetStream {
    type Item = Result<GetStreamResponse, Status>;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let me = self.get_mut();
        let next = me.rx.poll_recv(cx);
        if let Poll::Ready(Some(Ok(_))) = &next {
            me.room.add_permits(1);
        }
        next
    }
}
/// Blocks of a PutStream being put while the next one fills.
const PUT_BLOCKS_IN_FLIGHT: usize = 2;

/// The bytes per block: whole rows (times `chunk_rows` when that fits), or
/// pieces of a row longer than a block.
fn block_bytes(g: &Geometry, c: &Chunking) -> u64 {
    let elem = g.dtype.size() as u64;
    let row = g.shape.cols.saturating_mul(elem);
    let unit = if row == 0 {
        elem
    } else if row <= BLOCK {
        match c.chunk_rows {
            Some(r) if r.saturating_mul(row) <= BLOCK => r * row,
            _ => row,
        }
    } else {
        match c.chunk_cols {
            Some(k) if k.saturating_mul(elem) <= BLOCK => k * elem,
            _ => elem,
        }
    };
    unit * (BLOCK / unit).max(1)
}

/// The transfers that move packed bytes `start..start + len` of the region:
/// the packed side starts at 0 of the block's buffer.
fn block_transfers(g: &Geometry, start: u64, len: u64, store: bool) -> Vec<Transfer> {
    let elem = g.dtype.size() as u64;
    let (e0, e1) = (start / elem, (start + len) / elem);
    packed_pieces(g.shape, e0, e1)
        .into_iter()
        .map(|p| {
            let packed = Layout {
                offset: p.row * g.shape.cols + p.col - e0,
                row_stride: p.shape.cols,
            };
            let in_window = g.window.at(p.row, p.col);
            let (dst, src) = if store {
                (in_window, packed)
            } else {
                (packed, in_window)
            };
            Transfer {
                dtype: g.dtype,
                shape: p.shape,
                dst,
                src,
            }
        })
        .collect()
}

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
    s.message().await.map_err(|status| Error::ClientStream {
        call: "PutStream",
        status,
    })
}

struct Target {
    rank: Arc<Rank>,
    peer: u32,
    win: WindowId,
    op: OpKind,
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
                match t.op {
                    OpKind::AtomicAdd => {
                        t.rank
                            .atomic_add_region(t.peer, t.win, &tr, &bytes, t.chunking)
                            .await?
                    }
                    _ => {
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
    let (op, dtype) = if h.atomic_add {
        if h.region.is_none() {
            return Err(Error::invalid(
                CALL,
                "atomic_add needs a region: its dtype says how to add",
            ));
        }
        (
            OpKind::AtomicAdd,
            region_dtype(CALL, h.region.as_ref(), Dtype::Int8)?,
        )
    } else {
        (
            OpKind::Put,
            region_dtype(CALL, h.region.as_ref(), Dtype::Int8)?,
        )
    };
    let g = geometry(CALL, dtype, h.offset, h.region.as_ref(), h.len)?;
    let chunking = chunking(h.chunking.as_ref());
    // Everything is checked before the first byte lands.
    rank.check_transfer(op, h.rank, win, &g.store(), &chunking)?;
    let block = block_bytes(&g, &chunking);
    let target = Arc::new(Target {
        rank,
        peer: h.rank,
        win,
        op,
        g,
        chunking,
    });
    let mut inflight = Inflight(VecDeque::new());
    let mut acc = BytesMut::new();
    // The budget for the block being gathered: a whole block's worth, taken
    // before its first byte is (so a spent budget stops reading the client).
    let mut gathering: Option<Lease> = None;
    let (mut received, mut flushed, mut applied) = (0u64, 0u64, 0u64);
    let mut data = first.data;
    let mut ended = false;
    loop {
        received += data.len() as u64;
        if received > g.packed_len {
            // Stop at once: the client is sending more than it said.
            while let Some(r) = inflight.pop().await {
                applied += r.unwrap_or(0);
            }
            return Err(Error::StreamLength {
                rank: h.rank,
                expected: g.packed_len,
                got: received,
                applied,
            });
        }
        if !data.is_empty() && gathering.is_none() {
            gathering = Some(streams.budget.take(block as usize).await);
        }
        acc.extend_from_slice(&data);
        while acc.len() as u64 >= block || (ended && !acc.is_empty()) {
            let take = (acc.len() as u64).min(block) as usize;
            let bytes = acc.split_to(take).freeze();
            let lease = match gathering.take() {
                Some(l) => l,
                None => streams.budget.take(take).await,
            };
            inflight.0.push_back(target.spawn(flushed, bytes, lease));
            if !acc.is_empty() {
                gathering = Some(streams.budget.take(block as usize).await);
            }
            flushed += take as u64;
            while inflight.0.len() > PUT_BLOCKS_IN_FLIGHT {
                if let Some(r) = inflight.pop().await {
                    applied += r?;
                }
            }
        }
        if ended {
            break;
        }
        match next(&mut s).await? {
            Some(m) => {
                if m.header.is_some() {
                    return Err(Error::invalid(
                        CALL,
                        "only the first message carries a header",
                    ));
                }
                data = m.data;
            }
            None => {
                if received != g.packed_len {
                    while let Some(r) = inflight.pop().await {
                        applied += r.unwrap_or(0);
                    }
                    return Err(Error::StreamLength {
                        rank: h.rank,
                        expected: g.packed_len,
                        got: received,
                        applied,
                    });
                }
                ended = true;
                data = Bytes::new();
            }
        }
    }
    while let Some(r) = inflight.pop().await {
        r?;
    }
    Ok(())
}

/// Starts a GetStream: checks the request, takes the budget for gRPC's
/// own buffers of it, then reads messages a few ahead of the client.
pub(crate) async fn get(
    rank: Arc<Rank>,
    r: GetStreamRequest,
    max_message: usize,
    streams: &Streams,
    client: Option<ClientInfo>,
) -> Result<GetStream, Error> {
    const CALL: &str = "GetStream";
    let win = window(&rank, &r.window)?;
    let dtype = region_dtype(CALL, r.region.as_ref(), Dtype::Int8)?;
    let g = geometry(CALL, dtype, r.offset, r.region.as_ref(), r.len)?;
    let chunking = chunking(r.chunking.as_ref());
    rank.check_transfer(OpKind::Get, r.rank, win, &g.load(), &chunking)?;
    let message = max_message.min(GET_MESSAGE) as u64;
    let downstream = streams.budget.take(2 * message as usize).await;
    // One slot more than the read-ahead: room for the final status.
    let (tx, rx) = mpsc::channel(GET_AHEAD + 1);
    let room = Arc::new(Semaphore::new(GET_AHEAD));
    let producer = Producer {
        rank,
        peer: r.rank,
        win,
        g,
        chunking,
        message,
        budget: streams.budget.clone(),
        stall: streams.stall_timeout,
        room: room.clone(),
        tx,
        client,
        metrics: streams.metrics.clone(),
    };
    tokio::spawn(producer.run());
    Ok(GetStream {
        rx,
        room,
        _downstream: downstream,
    })
}

/// Reads a GetStream's messages from the window, as the client makes room.
struct Producer {
    rank: Arc<Rank>,
    peer: u32,
    win: WindowId,
    g: Geometry,
    chunking: Chunking,
    message: u64,
    budget: Budget,
    stall: Duration,
    room: Arc<Semaphore>,
    tx: mpsc::Sender<Result<GetStreamResponse, Status>>,
    client: Option<ClientInfo>,
    metrics: Arc<super::GrpcMetrics>,
}

type Fetch = JoinHandle<Result<Bytes, Error>>;

impl Producer {
    fn fetch(&self, start: u64, lease: Lease) -> Fetch {
        let len = self.message.min(self.g.packed_len - start);
        let (rank, peer, win, g, chunking) = (
            self.rank.clone(),
            self.peer,
            self.win,
            self.g,
            self.chunking,
        );
        tokio::spawn(async move {
            let mut buf = vec![0u8; len as usize];
            for t in block_transfers(&g, start, len, false) {
                rank.get_region(peer, win, &t, &mut buf, chunking).await?;
            }
            Ok::<_, Error>(lease.attach(buf))
        })
    }

    /// Room for one more message: at once, or once the client takes one;
    /// `None` if it took nothing for the stall timeout.
    async fn room(&self) -> Option<()> {
        let permit = tokio::time::timeout(self.stall, self.room.acquire())
            .await
            .ok()?
            .ok()?;
        // Given back by the stream when the client takes a message.
        permit.forget();
        Some(())
    }

    async fn run(self) {
        let len = self.g.packed_len;
        let mut inflight: VecDeque<Fetch> = VecDeque::new();
        let mut at = 0u64;
        let mut sent = 0u64;
        loop {
            // Read ahead as far as the client has made room.
            while at < len && inflight.len() < GET_AHEAD {
                if inflight.is_empty() {
                    if self.room().await.is_none() {
                        return self.stalled(sent).await;
                    }
                } else {
                    match self.room.try_acquire() {
                        Ok(p) => p.forget(),
                        Err(_) => break,
                    }
                }
                let n = self.message.min(len - at);
                let lease = self.budget.take(n as usize).await;
                inflight.push_back(self.fetch(at, lease));
                at += n;
            }
            let Some(h) = inflight.pop_front() else {
                return;
            };
            let result = h
                .await
                .unwrap_or_else(|e| Err(Error::Internal(format!("a get task failed: {e}"))));
            let item = result.map(|data| {
                sent += data.len() as u64;
                GetStreamResponse { data }
            });
            let failed = item.is_err();
            if self.tx.send(item.map_err(Status::from)).await.is_err() || failed {
                // The client went away, or the read failed (said).
                for h in inflight {
                    h.abort();
                }
                return;
            }
        }
    }

    /// The client took nothing for the stall timeout: queue a status that
    /// says so behind the data, and close the connection if the client
    /// does not take anything within another stall timeout.
    async fn stalled(self, sent: u64) {
        let remote = self
            .client
            .as_ref()
            .and_then(|c| c.remote)
            .map_or_else(|| "a client".to_string(), |a| a.to_string());
        let why = format!(
            "GetStream: the client read nothing for {:?} (--grpc-stall-timeout); the stream was \
             cancelled after {sent} of {} bytes",
            self.stall, self.g.packed_len
        );
        self.metrics
            .stalled
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(rank = self.rank.rank(), client = %remote, "{why}");
        // The channel keeps a slot for this.
        let _ = self
            .tx
            .try_send(Err(Status::deadline_exceeded(why.clone())));
        if self.room().await.is_some() {
            return;
        }
        if let Some(c) = &self.client {
            tracing::info!(
                rank = self.rank.rank(),
                client = %remote,
                "closing the connection of a client that holds a stalled GetStream"
            );
            c.kill.kill(format!(
                "{why}; the client did not read for another {:?}",
                self.stall
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pld_proto::region::Shape;

    fn geometry(rows: u64, cols: u64, dtype: Dtype) -> Geometry {
        Geometry {
            dtype,
            shape: Shape { rows, cols },
            window: Layout {
                offset: 100,
                row_stride: cols + 3,
            },
            packed_len: rows * cols * dtype.size() as u64,
        }
    }

    #[test]
    fn blocks_are_whole_rows_and_whole_chunk_rows_where_they_fit() {
        let g = geometry(4096, 1000, Dtype::Fp32); // 4000-byte rows
        assert_eq!(block_bytes(&g, &Chunking::default()) % 4000, 0);
        let c = Chunking::pipelined(64, 100);
        let b = block_bytes(&g, &c);
        assert_eq!(b % (64 * 4000), 0, "{b}");
        assert!(b <= BLOCK);
        // One 256 MiB row: blocks of elements.
        let g = geometry(1, 64 << 20, Dtype::Fp32);
        assert_eq!(block_bytes(&g, &Chunking::default()), BLOCK);
    }

    #[test]
    fn block_transfers_cover_the_block_in_the_window() {
        let g = geometry(5, 7, Dtype::Fp16);
        // Elements 3..20 of the packed region: rest of row 0, row 1, head of row 2.
        let ts = block_transfers(&g, 6, 34, true);
        let shapes: Vec<_> = ts.iter().map(|t| (t.shape.rows, t.shape.cols)).collect();
        assert_eq!(shapes, vec![(1, 4), (1, 7), (1, 6)]);
        assert_eq!(ts[0].dst.offset, 100 + 3);
        assert_eq!(ts[0].src.offset, 0);
        assert_eq!(ts[1].dst.offset, 100 + 10);
        assert_eq!(ts[1].src.offset, 4);
        assert_eq!(ts[2].src.offset, 11);
        let back = block_transfers(&g, 6, 34, false);
        assert_eq!(back[1].src, ts[1].dst);
    }
}
