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
//! closed (HTTP/2 cannot reach a client whose window is shut). A PutStream
//! whose client goes quiet puts what it gathered and gives its block's
//! budget back; one quiet for the stall timeout is cancelled the same way.

mod get;
mod put;

pub(crate) use get::{GetStream, get};
pub(crate) use put::put;

use super::budget::Budget;
use super::request::Geometry;
use pld_proto::region::{Chunking, Layout, Transfer, packed_pieces};
use std::sync::Arc;
use std::time::Duration;

/// About how many bytes one block holds.
const BLOCK: u64 = 8 << 20;

/// What the streams share: the budget, and when a client counts as stalled.
#[derive(Debug, Clone)]
pub(crate) struct Streams {
    pub budget: Budget,
    pub stall_timeout: Duration,
    pub metrics: Arc<super::GrpcMetrics>,
    /// A GetStream's producer outlives its call: it stops when the
    /// daemon does.
    pub drain: Arc<super::drain::Drain>,
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use pld_proto::Dtype;
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
