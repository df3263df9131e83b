//! The atomics of a [`Rank`]: atomic add (elementwise, with a handle or
//! without), fetch_add and compare_swap. A small atomic add takes the
//! put's path — queued in the outbox without an await, its frame head
//! written by hand, applied at the target without a `Header` — so that
//! counters updated many times before one `quiet` coalesce as puts do.

use super::handle::{self, OpHandle};
use super::{Rank, Target, WindowId, check};
use crate::error::{AccessError, Result};
use crate::peer::link::outbox::COALESCE_MAX;
use crate::peer::link::{Handle, Implicit, Issue, Link, Pending};
use crate::window::{Window, check_fits};
use pld_proto::checked::AccessKind;
use pld_proto::frame::Store;
use pld_proto::v1::{PeerCompareSwap, PeerFetchAdd, header::Body};
use pld_proto::{Dtype, Element, OpKind};
use std::sync::Arc;

impl Rank {
    /// Elementwise `peer_window[offset..] += operands`, atomic per element.
    /// `operands` holds little-endian elements of `dtype`; `offset` and the
    /// length must be multiples of the element size.
    pub async fn atomic_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<()> {
        self.atomic_add_nb(peer, win, offset, dtype, operands)
            .await?
            .wait()
            .await
    }

    /// [`Rank::atomic_add`] of typed elements.
    pub async fn atomic_add_elems<T: Element>(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        values: &[T],
    ) -> Result<()> {
        let bytes = pld_proto::dtype::to_bytes(values);
        self.atomic_add(peer, win, offset, T::DTYPE, &bytes).await
    }

    /// Non-blocking atomic add.
    pub async fn atomic_add_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<OpHandle<()>> {
        let w = self.check_add(peer, win, offset, dtype, operands)?;
        let op = OpKind::AtomicAdd;
        // Most ops find their link up: no await for it.
        let target = match self.state.members().rejoining(peer) {
            false => self.target_now(peer)?,
            true => self.target(peer).await?,
        };
        let link = match target {
            Target::Local => {
                let bytes = offset..offset + operands.len() as u64;
                self.check_local(op, win, std::slice::from_ref(&bytes), AccessKind::AtomicAdd)?;
                return self.local_op(op, peer, w.atomic_add(offset, dtype, operands));
            }
            Target::Remote(link) => link,
        };
        // A small add (a counter's) is queued without an await, as a
        // small put is.
        if operands.len() <= link.peer_max_payload.min(COALESCE_MAX) {
            let add = Issue::store(Store::add(dtype), win.0, offset, operands, Handle);
            let (id, full) = link.queue(add)?;
            if full {
                link.flush().await;
            }
            let pending = Pending::new(link, id);
            return Ok(OpHandle::one(pending, check(peer, op, None), handle::acked));
        }
        self.store_large(
            &link,
            peer,
            (win, w),
            Store::add(dtype),
            dtype,
            offset,
            operands,
        )
        .await
    }

    /// Implicit-completion atomic add — OpenSHMEM's non-fetching
    /// `shmem_atomic_add`, complete at the next `quiet`:
    /// [`Rank::atomic_add_nb`] without a handle, as [`Rank::put_nbi`] is
    /// [`Rank::put_nb`] without one. For counters that many updates hit
    /// before one `quiet`; a failure fails that quiet, naming the add.
    pub async fn atomic_add_nbi(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<()> {
        self.check_add(peer, win, offset, dtype, operands)?;
        // Queued in place, as a small put_nbi is.
        let (store, window) = (Store::add(dtype), win.0);
        let add = || Issue::store(store, window, offset, operands, Implicit);
        let queue = |link: &Arc<Link>| Ok(link.queue(add())?.1);
        if let Some(queued) = self.queue_in_place(peer, operands.len(), queue) {
            if let Some(link) = queued? {
                link.flush().await;
            }
            return Ok(());
        }
        // (As put_nbi's: the window and range are looked at again.)
        self.atomic_add_nb(peer, win, offset, dtype, operands)
            .await?
            .detach()
    }

    /// The window `win` of an atomic add, once its dtype and range are
    /// checked: what the origin refuses before anything is sent.
    fn check_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        operands: &[u8],
    ) -> Result<&Window> {
        let op = OpKind::AtomicAdd;
        let w = self.window_for(op, peer, win)?;
        if dtype == Dtype::Unspecified {
            return Err(self.refused(op, peer)(AccessError::UnknownDtype {
                value: dtype as i32,
            }));
        }
        w.check_elems(offset, operands.len() as u64, dtype)
            .map_err(self.refused(op, peer))?;
        Ok(w)
    }

    /// Atomically adds `value` to the int32/int64 cell at `offset`; returns
    /// the previous value.
    pub async fn fetch_add(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> Result<i64> {
        self.fetch_add_nb(peer, win, offset, dtype, value)
            .await?
            .wait()
            .await
    }

    /// Non-blocking fetch_add; the handle resolves with the previous value.
    pub async fn fetch_add_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> Result<OpHandle<i64>> {
        let at = CellAt::new(OpKind::FetchAdd, peer, win, offset, dtype);
        let body = Body::FetchAdd(PeerFetchAdd {
            window: win.0,
            offset,
            dtype: dtype as i32,
            value,
        });
        let apply = |w: &Window| w.fetch_add(offset, dtype, value);
        self.single_cell(at, &[value], AccessKind::FetchAdd, body, apply, false)
            .await
    }

    /// Atomically replaces the int32/int64 cell at `offset` by `desired` if
    /// it holds `expected`; returns the previous value (equal to `expected`
    /// exactly when it swapped).
    pub async fn compare_swap(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        expected: i64,
        desired: i64,
    ) -> Result<i64> {
        self.compare_swap_nb(peer, win, offset, dtype, expected, desired)
            .await?
            .wait()
            .await
    }

    /// Non-blocking compare_swap.
    pub async fn compare_swap_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        expected: i64,
        desired: i64,
    ) -> Result<OpHandle<i64>> {
        let at = CellAt::new(OpKind::CompareSwap, peer, win, offset, dtype);
        let body = Body::CompareSwap(PeerCompareSwap {
            window: win.0,
            offset,
            dtype: dtype as i32,
            expected,
            desired,
        });
        let apply = |w: &Window| w.compare_swap(offset, dtype, expected, desired);
        let values = [expected, desired];
        self.single_cell(at, &values, AccessKind::CompareSwap, body, apply, false)
            .await
    }

    /// What every single-cell atomic (fetch_add, compare_swap, the cell
    /// ops) does: check the cell and the values for it, then apply it here
    /// (through checked mode) or send `body` to the peer. `acked`: the
    /// target answers with an ack, and the handle resolves with 0.
    pub(super) async fn single_cell(
        &self,
        at: CellAt,
        values: &[i64],
        kind: AccessKind,
        body: Body,
        apply: impl FnOnce(&Window) -> std::result::Result<i64, AccessError>,
        acked: bool,
    ) -> Result<OpHandle<i64>> {
        let CellAt {
            op,
            peer,
            win,
            offset,
            dtype,
        } = at;
        let w = self.window_for(op, peer, win)?;
        w.check_cell(op, offset, dtype)
            .and_then(|_| values.iter().try_for_each(|v| check_fits(op, dtype, *v)))
            .map_err(self.refused(op, peer))?;
        match self.target(peer).await? {
            Target::Local => {
                let r = self.local_atomic(op, win, offset, dtype, kind, || apply(w));
                self.local_op(op, peer, r.map(|v| if acked { 0 } else { v }))
            }
            Target::Remote(link) if acked => self.single(&link, op, body, handle::acked_zero).await,
            Target::Remote(link) => self.single(&link, op, body, handle::value).await,
        }
    }
}

/// The cell a single-cell atomic targets, and the op.
#[derive(Debug, Clone, Copy)]
pub(super) struct CellAt {
    op: OpKind,
    peer: u32,
    win: WindowId,
    offset: u64,
    dtype: Dtype,
}

impl CellAt {
    pub(super) fn new(op: OpKind, peer: u32, win: WindowId, offset: u64, dtype: Dtype) -> CellAt {
        CellAt {
            op,
            peer,
            win,
            offset,
            dtype,
        }
    }
}
