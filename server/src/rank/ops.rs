//! The ops of a [`Rank`]: flat put and get, and signals — blocking and
//! non-blocking. Atomics are in `atomic.rs`, regions in `region.rs`,
//! barriers, waits and quiet in `sync.rs`.

use super::handle::{self, Finish, OpHandle};
use super::{Parts, Rank, Target, WindowId, check, contiguous, pieces, region};
use crate::error::{AccessError, Result};
use crate::peer::link::outbox::COALESCE_MAX;
use crate::peer::link::{Handle, HandleInto, Implicit, Issue, Landing, Link, Pending};
use crate::transport::Raw;
use crate::window::Window;
use bytes::{Bytes, BytesMut};
use pld_proto::checked::AccessKind;
use pld_proto::frame::Store;
use pld_proto::region::ChunkPlan;
use pld_proto::v1::{PeerGet, PeerNotify, header::Body};
use pld_proto::{Dtype, NotifyOp, OpKind};
use std::sync::Arc;
use tracing::Instrument;

impl Rank {
    /// Writes `data` at byte `offset` of `peer`'s window. Returns when the
    /// data is in the peer's window.
    pub async fn put(&self, peer: u32, win: WindowId, offset: u64, data: &[u8]) -> Result<()> {
        self.put_nb(peer, win, offset, data).await?.wait().await
    }

    /// Non-blocking put: returns once `data` is handed to the transport (the
    /// buffer may be reused); the handle resolves when the data is in the
    /// peer's window. Larger than one frame, it travels as several.
    pub async fn put_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        data: &[u8],
    ) -> Result<OpHandle<()>> {
        let op = OpKind::Put;
        let w = self.window_for(op, peer, win)?;
        w.check_range(offset, data.len() as u64)
            .map_err(self.refused(op, peer))?;
        // Most ops find their link up: no await for it.
        let target = match self.state.members().rejoining(peer) {
            false => self.target_now(peer)?,
            true => self.target(peer).await?,
        };
        let link = match target {
            Target::Local => {
                let bytes = offset..offset + data.len() as u64;
                self.check_local(op, win, std::slice::from_ref(&bytes), AccessKind::Put)?;
                return self.local_op(op, peer, w.write(offset, data));
            }
            Target::Remote(link) => link,
        };
        // A small put (the common op) is queued without an await: no write
        // happens unless the outbox is full.
        if data.len() <= link.peer_max_payload.min(COALESCE_MAX) {
            let put = Issue::store(Store::Put, win.0, offset, data, Handle);
            let (id, full) = link.queue(put)?;
            if full {
                link.flush().await;
            }
            let pending = Pending::new(link, id);
            return Ok(OpHandle::one(pending, check(peer, op, None), handle::acked));
        }
        self.store_large(&link, peer, (win, w), Store::Put, Dtype::Int8, offset, data)
            .await
    }

    /// A put or atomic add too large for the outbox (at `offset` of
    /// `win`, its elements of `dtype`: int8 for a put): written at once as
    /// one frame, or streamed in chunks of whole elements.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn store_large(
        &self,
        link: &Arc<Link>,
        peer: u32,
        (win, w): (WindowId, &Window),
        store: Store,
        dtype: Dtype,
        offset: u64,
        data: &[u8],
    ) -> Result<OpHandle<()>> {
        let op = store.op();
        // One frame: no chunk plan, no span.
        if data.len() <= link.peer_max_payload {
            let store = Issue::store(store, win.0, offset, data, Handle);
            let pending = link.request(store).await?;
            return Ok(OpHandle::one(pending, check(peer, op, None), handle::acked));
        }
        let span = tracing::debug_span!("store", op = op.name(), peer, window = w.name(), offset, %dtype, len = data.len());
        let size = dtype.size() as u64;
        let t = contiguous(dtype, offset / size, data.len() as u64 / size);
        let plan = ChunkPlan::by_rows(t.shape, (link.peer_max_payload as u64 / size).max(1));
        let parts = region::send_chunks(link, store, win, &t, data, plan, usize::MAX)
            .instrument(span)
            .await?;
        Ok(OpHandle::remote(
            parts.into(),
            check(peer, op, None),
            handle::acked,
        ))
    }

    /// Queues a small request without a handle on `peer`'s link in place,
    /// with no reference to the link taken (`queue` returns whether the
    /// outbox is full). `None` where it cannot go that way — too large, no
    /// link (`peer` is this rank), a rejoining peer — and the caller takes
    /// the handle path; otherwise the link to flush now, if any. Not an
    /// `async fn`: a future of its own per op shows on the message-rate
    /// path (docs/PERFORMANCE.md).
    #[inline(always)]
    pub(super) fn queue_in_place(
        &self,
        peer: u32,
        len: usize,
        queue: impl FnOnce(&Arc<Link>) -> Result<bool>,
    ) -> Option<Result<Option<Arc<Link>>>> {
        if len > COALESCE_MAX || self.state.members().rejoining(peer) {
            return None;
        }
        self.links
            .with(peer, |link| {
                (len <= link.peer_max_payload).then(|| Ok(queue(link)?.then(|| link.clone())))
            })
            .flatten()
    }

    /// Implicit-completion put — OpenSHMEM's `put_nbi`, and `MPI_Put`'s
    /// model: [`Rank::put_nb`] without a handle. It returns once `data` is
    /// handed to the transport; the put completes by the next
    /// [`Rank::quiet`], and if it fails (refused at the target, on a lost
    /// link, at the op timeout), that quiet fails, naming it. What is
    /// refused before anything is sent is refused here.
    pub async fn put_nbi(&self, peer: u32, win: WindowId, offset: u64, data: &[u8]) -> Result<()> {
        let op = OpKind::Put;
        let w = self.window_for(op, peer, win)?;
        w.check_range(offset, data.len() as u64)
            .map_err(self.refused(op, peer))?;
        // The message-rate path: a small put on a link that is up.
        let put = || Issue::store(Store::Put, win.0, offset, data, Implicit);
        let queue = |link: &Arc<Link>| Ok(link.queue(put())?.1);
        if let Some(queued) = self.queue_in_place(peer, data.len(), queue) {
            if let Some(link) = queued? {
                link.flush().await;
            }
            return Ok(());
        }
        // (A second look at the window and range: cheap next to the
        // chunks of a put this large; a nested future per put_nb was not.)
        self.put_nb(peer, win, offset, data).await?.detach()
    }

    /// Reads `len` bytes at byte `offset` of `peer`'s window.
    pub async fn get(&self, peer: u32, win: WindowId, offset: u64, len: u64) -> Result<Bytes> {
        self.get_nb(peer, win, offset, len).await?.wait().await
    }

    /// Non-blocking get; the handle resolves with the bytes.
    pub async fn get_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        len: u64,
    ) -> Result<OpHandle<Bytes>> {
        let op = OpKind::Get;
        // The range first: `len` is the caller's (a gRPC client's), and a
        // buffer is allocated only for bytes the window has.
        self.window_for(op, peer, win)?
            .check_range(offset, len)
            .map_err(self.refused(op, peer))?;
        let check = check(peer, op, Some(len));
        match self
            .get_parts(peer, win, offset, BytesMut::zeroed(len as usize))
            .await?
        {
            Parts::Local(b) => Ok(OpHandle::ready(Ok(b.freeze()))),
            Parts::Remote(parts) => Ok(OpHandle::remote(parts, check, handle::data)),
        }
    }

    /// Non-blocking get into `buf`, all of it: the bytes at `offset` go
    /// from the socket straight into `buf` (no other copy), and the handle
    /// gives `buf` back. Reusing buffers, a program gets without allocating.
    pub async fn get_nb_into(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        buf: BytesMut,
    ) -> Result<OpHandle<BytesMut>> {
        let check = check(peer, OpKind::Get, Some(buf.len() as u64));
        match self.get_parts(peer, win, offset, buf).await? {
            Parts::Local(b) => Ok(OpHandle::ready(Ok(b))),
            Parts::Remote(parts) => Ok(OpHandle::remote(parts, check, handle::filled)),
        }
    }

    /// Implicit-completion get — OpenSHMEM's `shmem_getmem_nbi`, and
    /// `MPI_Get`'s model: reads `len` bytes at byte `offset` of `peer`'s
    /// window `win` into this rank's own window `dest` at `dest_offset`,
    /// straight from the socket, with no handle. The bytes are there by the
    /// next [`Rank::quiet`]; until then, and after a failed get, the
    /// destination's values are undefined. A failure — refused at the
    /// target, on a lost link, at the op timeout — fails that quiet, naming
    /// it; what is refused before anything is sent (no such rank or window,
    /// either range outside its window) is refused here. Many gets may land
    /// in the same bytes, as many `MPI_Get`s may into one buffer.
    #[allow(clippy::too_many_arguments)]
    pub async fn get_nbi(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        len: u64,
        dest: WindowId,
        dest_offset: u64,
    ) -> Result<()> {
        let (op, me) = (OpKind::Get, self.rank());
        let w = self.window_for(op, peer, win)?;
        w.check_range(offset, len).map_err(self.refused(op, peer))?;
        let d = self.window_for(op, me, dest)?;
        let rows = d
            .check_contiguous(dest_offset, len)
            .map_err(self.refused(op, me))?;
        let into = dest_offset..dest_offset + len;
        let into = std::slice::from_ref(&into);
        let link = match self.target(peer).await? {
            Target::Local => {
                let from = offset..offset + len;
                self.check_local(op, win, std::slice::from_ref(&from), AccessKind::Get)?;
                self.check_local(op, dest, into, AccessKind::Put)?;
                // (A copy through a buffer: the ranges may overlap.)
                let bytes = w.read(offset, len).map_err(self.refused(op, peer))?;
                d.write(dest_offset, &bytes).map_err(self.refused(op, me))?;
                self.state.stats().local(op);
                return Ok(());
            }
            Target::Remote(link) => link,
        };
        // Checked mode: the landing is this rank's write of `dest`,
        // recorded as the get is issued.
        self.check_local(op, dest, into, AccessKind::Put)?;
        // (One row: the destination is contiguous.)
        let Some(row) = d.raw_rows(rows).next().filter(|r| r.len > 0) else {
            return Ok(());
        };
        for (at, n) in pieces(row.len, self.state.config().max_payload) {
            let body = Body::Get(PeerGet {
                window: win.0,
                offset: offset + at as u64,
                len: n as u64,
                region: None,
            });
            let part = Raw {
                ptr: row.ptr.wrapping_add(at),
                len: n,
            };
            link.issue(Issue::body(body, &[], Landing(part))).await?;
        }
        Ok(())
    }

    /// Issues a get of `buf.len()` bytes: one request per frame, each with
    /// its own slice of `buf` to be read into.
    async fn get_parts(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        mut buf: BytesMut,
    ) -> Result<Parts> {
        let op = OpKind::Get;
        let len = buf.len() as u64;
        let w = self.window_for(op, peer, win)?;
        w.check_range(offset, len).map_err(self.refused(op, peer))?;
        let link = match self.target(peer).await? {
            Target::Local => {
                let bytes = offset..offset + len;
                self.check_local(op, win, std::slice::from_ref(&bytes), AccessKind::Get)?;
                w.read_into(offset, &mut buf)
                    .map_err(self.refused(op, peer))?;
                self.state.stats().local(op);
                return Ok(Parts::Local(buf));
            }
            Target::Remote(link) => link,
        };
        let span = tracing::debug_span!("get", peer, window = w.name(), offset, len);
        async {
            // Replies come to this rank: split by this rank's own frame limit.
            let mut parts = Vec::new();
            for (at, n) in pieces(len as usize, self.state.config().max_payload) {
                let body = Body::Get(PeerGet {
                    window: win.0,
                    offset: offset + at as u64,
                    len: n as u64,
                    region: None,
                });
                let into = HandleInto(buf.split_to(n));
                parts.push(link.request(Issue::body(body, &[], into)).await?);
            }
            Ok(Parts::Remote(parts))
        }
        .instrument(span)
        .await
    }

    /// Sets (`NotifyOp::Set`) or atomically adds to (`NotifyOp::AtomicAdd`)
    /// the int32 signal cell at `offset` of `peer`'s window.
    pub async fn notify(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        value: i32,
        op: NotifyOp,
    ) -> Result<()> {
        self.notify_nb(peer, win, offset, value, op)
            .await?
            .wait()
            .await
    }

    /// Non-blocking notify.
    pub async fn notify_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        value: i32,
        notify: NotifyOp,
    ) -> Result<OpHandle<()>> {
        let op = OpKind::Notify;
        let w = self.window_for(op, peer, win)?;
        w.check_signal(offset).map_err(self.refused(op, peer))?;
        if notify == NotifyOp::Unspecified {
            return Err(self.refused(op, peer)(AccessError::InvalidNotifyOp {
                value: notify as i32,
            }));
        }
        let body = Body::Notify(PeerNotify {
            window: win.0,
            offset,
            value,
            op: notify as i32,
        });
        match self.target(peer).await? {
            Target::Local => {
                let apply = || w.notify(offset, notify, value);
                let r = match self.state.checked() {
                    Some(c) => {
                        self.check_local_notify(op, win, offset, notify)?;
                        c.notify(win.0, offset, None, notify, value, apply)
                    }
                    None => apply(),
                };
                self.local_op(op, peer, r)
            }
            Target::Remote(link) => self.single(&link, op, body, handle::acked).await,
        }
    }

    pub(super) async fn single<T>(
        &self,
        link: &Arc<Link>,
        op: OpKind,
        body: Body,
        finish: Finish<T>,
    ) -> Result<OpHandle<T>> {
        let span = tracing::debug_span!("op", op = op.name(), peer = link.peer);
        let request = Issue::body(body, &[], Handle);
        let pending = link.request(request).instrument(span).await?;
        Ok(OpHandle::one(pending, check(link.peer, op, None), finish))
    }

    /// Orders this rank's puts, atomics and notifies to `peer`: those issued
    /// after the fence are applied after those issued before it.
    ///
    /// Every link is one ordered stream and the target applies its requests
    /// in arrival order, so ops to one peer are already applied in issue
    /// order; `fence` only checks the rank. See `docs/semantics.md`.
    pub fn fence(&self, peer: u32) -> Result<()> {
        self.target_now(peer).map(|_| ())
    }
}
