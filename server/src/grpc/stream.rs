//! `PutStream` and `GetStream`: regions of any size through bounded memory.
//!
//! The packed bytes of a region are cut into blocks of about 8 MiB (whole
//! rows, and whole multiples of `chunk_rows` rows where that fits, so that
//! the chunks on the peer plane are the ones a single transfer would send).
//! A PutStream gathers the client's messages into a block and puts it while
//! the next block arrives — at most two blocks in flight. A GetStream reads
//! the next block while it sends the current one as 1 MiB messages. No
//! transfer is ever held whole, on the daemon or on its peers.

use super::Error;
use super::service::{Geometry, chunking, region_dtype, window};
use crate::rank::{Rank, WindowId};
use bytes::{Bytes, BytesMut};
use pld_proto::region::{Chunking, Layout, Transfer, packed_pieces};
use pld_proto::v1::{GetStreamRequest, GetStreamResponse, PutStreamRequest};
use pld_proto::{Dtype, OpKind};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

/// The response stream of GetStream.
pub(crate) type GetStream = ReceiverStream<Result<GetStreamResponse, Status>>;

/// About how many bytes one block holds.
const BLOCK: u64 = 8 << 20;
/// The most data in one GetStream message.
const GET_MESSAGE: usize = 1 << 20;
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
    fn spawn(self: &Arc<Self>, start: u64, bytes: Bytes) -> JoinHandle<Result<u64, Error>> {
        let t = self.clone();
        tokio::spawn(async move {
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
pub(crate) async fn put(rank: Arc<Rank>, mut s: Streaming<PutStreamRequest>) -> Result<(), Error> {
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
    let g = Geometry::new(CALL, dtype, h.offset, h.region.as_ref(), h.len)?;
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
        acc.extend_from_slice(&data);
        while acc.len() as u64 >= block || (ended && !acc.is_empty()) {
            let take = (acc.len() as u64).min(block) as usize;
            let bytes = acc.split_to(take).freeze();
            inflight.0.push_back(target.spawn(flushed, bytes));
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

/// Starts a GetStream: checks the request, then reads block after block
/// (the next while the current one is sent) into the response stream.
pub(crate) fn get(
    rank: Arc<Rank>,
    r: GetStreamRequest,
    max_message: usize,
) -> Result<GetStream, Error> {
    const CALL: &str = "GetStream";
    let win = window(&rank, &r.window)?;
    let dtype = region_dtype(CALL, r.region.as_ref(), Dtype::Int8)?;
    let g = Geometry::new(CALL, dtype, r.offset, r.region.as_ref(), r.len)?;
    let chunking = chunking(r.chunking.as_ref());
    rank.check_transfer(OpKind::Get, r.rank, win, &g.load(), &chunking)?;
    let block = block_bytes(&g, &chunking);
    let message = max_message.min(GET_MESSAGE);
    let (tx, rx) = mpsc::channel(4);
    let peer = r.rank;
    let fetch = move |rank: Arc<Rank>, start: u64| {
        tokio::spawn(async move {
            let len = block.min(g.packed_len - start);
            let mut buf = vec![0u8; len as usize];
            for t in block_transfers(&g, start, len, false) {
                rank.get_region(peer, win, &t, &mut buf, chunking).await?;
            }
            Ok::<_, Error>(Bytes::from(buf))
        })
    };
    tokio::spawn(async move {
        let mut at = 0u64;
        let mut pending = (g.packed_len > 0).then(|| fetch(rank.clone(), 0));
        while let Some(h) = pending.take() {
            let result = h
                .await
                .unwrap_or_else(|e| Err(Error::Internal(format!("a get task failed: {e}"))));
            let mut bytes = match result {
                Ok(b) => b,
                Err(e) => {
                    let _ = tx.send(Err(e.into())).await;
                    return;
                }
            };
            at += bytes.len() as u64;
            if at < g.packed_len {
                pending = Some(fetch(rank.clone(), at));
            }
            while !bytes.is_empty() {
                let data = bytes.split_to(message.min(bytes.len()));
                if tx.send(Ok(GetStreamResponse { data })).await.is_err() {
                    // The client went away.
                    if let Some(h) = pending.take() {
                        h.abort();
                    }
                    return;
                }
            }
        }
    });
    Ok(ReceiverStream::new(rx))
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
