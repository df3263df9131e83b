//! Bulk transfers of 2-D strided regions: put, get and atomic_add, streamed
//! in chunks with a bounded number in flight.
//!
//! A transfer moves `shape` elements of `dtype` between a layout in this
//! process's buffer and a layout in a peer's window. It is cut into chunks
//! ([`ChunkPlan`]); each chunk is one frame, applied by the target as it
//! arrives, so no rank ever buffers a whole transfer. With `pipeline`, up to
//! `depth` chunks are in flight; without it, each chunk waits for the
//! previous one's ack (stop and wait). The op completes when the last chunk
//! is acknowledged — after it was applied.

use super::{Rank, Target, WindowId, handle};
use crate::error::{Error, Result};
use crate::peer::link::{Handle, Issue, Link, Pending, Reply};
use pld_proto::checked::AccessKind;
use pld_proto::frame::Store;
use pld_proto::geometry::{GeometryError, byte_offset, check_buffer, plan, wire_region};
use pld_proto::region::{Chunk, ChunkPlan, Chunking, Layout, Shape, Transfer, row_ranges};
use pld_proto::v1::{PeerGet, Region, header::Body};
use pld_proto::{Dtype, OpKind};
use std::collections::VecDeque;
use std::sync::Arc;

/// A transfer's geometry refused, for `op`.
fn bad(op: OpKind) -> impl Fn(GeometryError) -> Error {
    move |error| Error::InvalidTransfer { op, error }
}

/// The rows of the chunk `c` of a region in `layout`, as byte ranges.
fn rows(t: &Transfer, layout: Layout, c: &Chunk) -> impl Iterator<Item = std::ops::Range<usize>> {
    row_ranges(layout, *c, t.dtype.size() as u64)
}

impl Rank {
    /// Puts a 2-D region: `src` holds the region in `t.src`'s layout; it
    /// lands in `peer`'s window `win` in `t.dst`'s layout.
    pub async fn put_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> Result<()> {
        self.store_region(Store::Put, peer, win, t, src, chunking)
            .await
    }

    /// Atomically adds a 2-D region into `peer`'s window, chunk by chunk,
    /// atomic per element.
    pub async fn atomic_add_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> Result<()> {
        self.store_region(Store::add(t.dtype), peer, win, t, src, chunking)
            .await
    }

    /// Checks a transfer against `peer`'s window and the frame limits
    /// without moving anything: the window side (`t.dst` of a put or
    /// atomic add, `t.src` of a get) must lie in the window, and the
    /// chunking must fit. A transfer that passes fails later only if the
    /// network does. The gRPC plane checks a stream this way before its
    /// first byte lands.
    pub fn check_transfer(
        &self,
        op: OpKind,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        chunking: &Chunking,
    ) -> Result<()> {
        self.check_window(op, peer, win, t, chunking).map(|_| ())
    }

    fn check_window(
        &self,
        op: OpKind,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        chunking: &Chunking,
    ) -> Result<(&crate::window::Window, ChunkPlan, usize)> {
        let w = self.window_for(op, peer, win)?;
        let elem = t.dtype.size() as u64;
        let at = if op == OpKind::Get { t.src } else { t.dst };
        let region = Region {
            rows: t.shape.rows,
            cols: t.shape.cols,
            row_stride: at.row_stride,
            dtype: t.dtype as i32,
        };
        let offset = byte_offset(at, elem).map_err(bad(op))?;
        w.check_region(offset, &region)
            .map_err(self.refused(op, peer))?;
        // A get's replies come to this rank: its chunks obey this rank's
        // frame limit; stores obey the target's.
        let max = match self.target_now(peer)? {
            Target::Remote(link) if op != OpKind::Get => link.peer_max_payload,
            _ => self.state.config().max_payload,
        };
        let (plan, depth) = plan(t, chunking, max).map_err(bad(op))?;
        Ok((w, plan, depth))
    }

    async fn store_region(
        &self,
        store: Store,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        src: &[u8],
        chunking: Chunking,
    ) -> Result<()> {
        let op = store.op();
        check_buffer(
            t.src,
            t.shape,
            t.dtype.size() as u64,
            src.len(),
            "the source buffer",
        )
        .map_err(bad(op))?;
        let (w, plan, depth) = self.check_window(op, peer, win, t, &chunking)?;
        match self.target(peer).await? {
            Target::Local => {
                let whole = Chunk {
                    row: 0,
                    col: 0,
                    shape: t.shape,
                };
                if self.state.checked().is_some() {
                    let kind = store.access();
                    let bytes: Vec<_> = rows(t, t.dst, &whole)
                        .map(|d| d.start as u64..d.end as u64)
                        .collect();
                    self.check_local(op, win, &bytes, kind)?;
                }
                for (s, d) in rows(t, t.src, &whole).zip(rows(t, t.dst, &whole)) {
                    let data = &src[s];
                    match store {
                        Store::AtomicAdd { .. } => w.atomic_add(d.start as u64, t.dtype, data),
                        Store::Put => w.write(d.start as u64, data),
                    }
                    .map_err(self.refused(op, peer))?;
                }
                self.state.stats().local(op);
                Ok(())
            }
            Target::Remote(link) => {
                let inflight = send_chunks(&link, store, win, t, src, plan, depth).await?;
                for p in inflight {
                    handle::acked(
                        handle::OpReplies::One(p.wait().await?),
                        handle::Check {
                            peer,
                            op,
                            len: None,
                        },
                    )?;
                }
                Ok(())
            }
        }
    }

    /// Reads `dst.len()` bytes at byte `offset` of `peer`'s window into
    /// `dst`: frames are pipelined, and each lands in `dst` with one copy.
    pub async fn get_into(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dst: &mut [u8],
    ) -> Result<()> {
        let len = dst.len() as u64;
        let t = Transfer {
            dtype: Dtype::Int8,
            shape: Shape { rows: 1, cols: len },
            src: Layout {
                offset,
                row_stride: len,
            },
            dst: Layout {
                offset: 0,
                row_stride: len,
            },
        };
        self.get_region(peer, win, &t, dst, Chunking::default())
            .await
    }

    /// Gets a 2-D region of `peer`'s window (in `t.src`'s layout) into `dst`
    /// (in `t.dst`'s layout).
    pub async fn get_region(
        &self,
        peer: u32,
        win: WindowId,
        t: &Transfer,
        dst: &mut [u8],
        chunking: Chunking,
    ) -> Result<()> {
        let op = OpKind::Get;
        let elem = t.dtype.size() as u64;
        check_buffer(
            t.dst,
            t.shape,
            t.dtype.size() as u64,
            dst.len(),
            "the destination buffer",
        )
        .map_err(bad(op))?;
        let (w, plan, depth) = self.check_window(op, peer, win, t, &chunking)?;
        let link = match self.target(peer).await? {
            Target::Local => {
                let whole = Chunk {
                    row: 0,
                    col: 0,
                    shape: t.shape,
                };
                if self.state.checked().is_some() {
                    let bytes: Vec<_> = rows(t, t.src, &whole)
                        .map(|s| s.start as u64..s.end as u64)
                        .collect();
                    self.check_local(op, win, &bytes, AccessKind::Get)?;
                }
                for (s, d) in rows(t, t.src, &whole).zip(rows(t, t.dst, &whole)) {
                    w.read_into(s.start as u64, &mut dst[d])
                        .map_err(self.refused(op, peer))?;
                }
                self.state.stats().local(op);
                return Ok(());
            }
            Target::Remote(link) => link,
        };
        let mut inflight: VecDeque<(Chunk, Pending)> = VecDeque::new();
        for c in plan {
            if inflight.len() >= depth
                && let Some((done, p)) = inflight.pop_front()
            {
                scatter(peer, t, &done, p.wait().await?, dst)?;
            }
            let at = t.src.at(c.row, c.col);
            let len = c.shape.rows * c.shape.cols * elem;
            let body = Body::Get(PeerGet {
                window: win.0,
                offset: at.offset * elem,
                len,
                region: wire_region(t.dtype, t.src, c.shape),
            });
            let get = Issue::body(body, &[], Handle);
            inflight.push_back((c, link.request(get).await?));
        }
        for (done, p) in inflight {
            scatter(peer, t, &done, p.wait().await?, dst)?;
        }
        Ok(())
    }
}

/// Copies a get reply (the chunk's rows, packed) into `dst`.
fn scatter(peer: u32, t: &Transfer, c: &Chunk, reply: Reply, dst: &mut [u8]) -> Result<()> {
    let data = handle::data(
        handle::OpReplies::One(reply),
        handle::Check {
            peer,
            op: OpKind::Get,
            len: Some(c.shape.rows * c.shape.cols * t.dtype.size() as u64),
        },
    )?;
    let row = (c.shape.cols * t.dtype.size() as u64) as usize;
    for (d, s) in rows(t, t.dst, c).zip(data.chunks(row.max(1))) {
        dst[d].copy_from_slice(s);
    }
    Ok(())
}

/// Sends a put or atomic-add transfer chunk by chunk with at most `depth`
/// unacknowledged; returns the chunks still in flight. Non-dense source
/// rows are packed into one staging buffer, reused for every chunk (a chunk
/// is written out before `send` returns).
pub(super) async fn send_chunks(
    link: &Arc<Link>,
    store: Store,
    win: WindowId,
    t: &Transfer,
    src: &[u8],
    plan: ChunkPlan,
    depth: usize,
) -> Result<VecDeque<Pending>> {
    let op = store.op();
    let elem = t.dtype.size() as u64;
    let mut inflight = VecDeque::new();
    let mut staging = Vec::new();
    for c in plan {
        if inflight.len() >= depth
            && let Some(p) = inflight.pop_front()
        {
            let reply = Pending::wait(p).await?;
            handle::acked(
                handle::OpReplies::One(reply),
                handle::Check {
                    peer: link.peer,
                    op,
                    len: None,
                },
            )?;
        }
        let s = t.src.at(c.row, c.col);
        let payload: &[u8] = if s.dense(c.shape) {
            let start = (s.offset * elem) as usize;
            &src[start..start + (c.shape.rows * c.shape.cols * elem) as usize]
        } else {
            staging.clear();
            for r in rows(t, t.src, &c) {
                staging.extend_from_slice(&src[r]);
            }
            &staging
        };
        let d = t.dst.at(c.row, c.col);
        let region = wire_region(t.dtype, t.dst, c.shape);
        let body = store.body_in(win.0, d.offset * elem, region);
        let chunk = Issue::body(body, payload, Handle);
        inflight.push_back(link.request(chunk).await?);
    }
    Ok(inflight)
}
