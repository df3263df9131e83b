//! OpenSHMEM's single-cell atomics beyond add and compare_swap — swap,
//! fetch, set, and / or / xor with and without their fetch — and
//! put-with-signal, on a [`Rank`]. Each is one message, applied atomically
//! at the target ([`CellOp`]); none loops over the network.

use super::handle::{self, OpHandle};
use super::{Rank, Target, WindowId};
use crate::error::{AccessError, Result};
use crate::peer::link::{Handle, Issue};
use pld_proto::cell::CellOp;
use pld_proto::checked::AccessKind;
use pld_proto::v1::{PeerPutSignal, header::Body};
use pld_proto::{BitOp, Dtype, NotifyOp, OpKind, ReplyShape};

impl Rank {
    /// Atomically replaces the int32/int64 cell at `offset` by `value`;
    /// returns what it held.
    pub async fn swap(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> Result<i64> {
        self.cell_op_nb(peer, win, offset, dtype, CellOp::Swap(value))
            .await?
            .wait()
            .await
    }

    /// Atomically reads the int32/int64 cell at `offset`.
    pub async fn fetch(&self, peer: u32, win: WindowId, offset: u64, dtype: Dtype) -> Result<i64> {
        self.cell_op_nb(peer, win, offset, dtype, CellOp::Fetch)
            .await?
            .wait()
            .await
    }

    /// Atomically writes `value` into the int32/int64 cell at `offset`.
    pub async fn set(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        value: i64,
    ) -> Result<()> {
        self.cell_op_nb(peer, win, offset, dtype, CellOp::Set(value))
            .await?
            .wait()
            .await
            .map(drop)
    }

    /// Atomically applies `cell = cell op value` (and, or, xor) to the
    /// int32/int64 cell at `offset`.
    pub async fn atomic_bitwise(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        op: BitOp,
        value: i64,
    ) -> Result<()> {
        self.cell_op_nb(peer, win, offset, dtype, CellOp::Bitwise(op, value))
            .await?
            .wait()
            .await
            .map(drop)
    }

    /// [`Rank::atomic_bitwise`] that returns what the cell held.
    pub async fn fetch_bitwise(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        op: BitOp,
        value: i64,
    ) -> Result<i64> {
        self.cell_op_nb(peer, win, offset, dtype, CellOp::FetchBitwise(op, value))
            .await?
            .wait()
            .await
    }

    /// A single-cell atomic ([`CellOp`]); returns the previous value (0
    /// for `set` and the non-fetching bitwise ops).
    pub async fn cell_op(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        op: CellOp,
    ) -> Result<i64> {
        self.cell_op_nb(peer, win, offset, dtype, op)
            .await?
            .wait()
            .await
    }

    /// Non-blocking single-cell atomic: the handle resolves with the
    /// cell's previous value (0 for `set` and `atomic_bitwise`, whose
    /// target answers with an ack).
    pub async fn cell_op_nb(
        &self,
        peer: u32,
        win: WindowId,
        offset: u64,
        dtype: Dtype,
        cell: CellOp,
    ) -> Result<OpHandle<i64>> {
        let op = cell.kind();
        if let CellOp::Bitwise(b, _) | CellOp::FetchBitwise(b, _) = cell
            && b == BitOp::Unspecified
        {
            return Err(self.refused(op, peer)(AccessError::InvalidBitOp {
                value: b as i32,
            }));
        }
        let at = super::atomic::CellAt::new(op, peer, win, offset, dtype);
        let kind = op.access().unwrap_or(AccessKind::Atomic);
        let body = cell.body(win.0, offset, dtype);
        let apply = |w: &crate::window::Window| w.cell_op(offset, dtype, cell);
        // Set and the non-fetching bitwise ops answer with an ack, no value.
        let acked = !matches!(op.reply(), ReplyShape::Value);
        self.single_cell(at, &[cell.value()], kind, body, apply, acked)
            .await
    }

    /// Writes `data` at `offset` of `peer`'s window `win`, then applies
    /// `signal_op` with `signal` to the 8-byte signal cell at
    /// `signal_offset` of its window `signal_win` — OpenSHMEM's
    /// `put_signal`. One message when `data` fits a frame (a larger one
    /// sends its head as puts first: a link applies in issue order); a
    /// rank that sees the signal sees the data.
    #[allow(clippy::too_many_arguments)]
    pub async fn put_signal_nb(
        &self,
        peer: u32,
        (win, offset): (WindowId, u64),
        data: &[u8],
        (signal_win, signal_offset): (WindowId, u64),
        signal: u64,
        signal_op: NotifyOp,
    ) -> Result<OpHandle<()>> {
        let op = OpKind::PutSignal;
        let w = self.window_for(op, peer, win)?;
        let sw = self.window_for(op, peer, signal_win)?;
        w.check_range(offset, data.len() as u64)
            .and_then(|_| sw.check_elems(signal_offset, 8, Dtype::Int64))
            .map_err(self.refused(op, peer))?;
        if !matches!(signal_op, NotifyOp::Set | NotifyOp::AtomicAdd) {
            return Err(self.refused(op, peer)(AccessError::InvalidNotifyOp {
                value: signal_op as i32,
            }));
        }
        let link = match self.target(peer).await? {
            Target::Local => {
                let bytes = offset..offset + data.len() as u64;
                self.check_local(op, win, std::slice::from_ref(&bytes), AccessKind::Put)?;
                let r = w
                    .write(offset, data)
                    .and_then(|_| sw.signal64(signal_offset, signal_op, signal));
                return self.local_op(op, peer, r);
            }
            Target::Remote(link) => link,
        };
        // The head that does not fit one frame goes first, as puts.
        let split = data.len().saturating_sub(link.peer_max_payload);
        let (head, tail) = data.split_at(split);
        if !head.is_empty() {
            self.put_nb(peer, win, offset, head).await?.detach()?;
        }
        let body = Body::PutSignal(PeerPutSignal {
            window: win.0,
            offset: offset + split as u64,
            signal_window: signal_win.0,
            signal_offset,
            signal,
            signal_op: signal_op as i32,
        });
        let span = tracing::debug_span!("op", op = op.name(), peer);
        let pending =
            tracing::Instrument::instrument(link.request(Issue::body(body, tail, Handle)), span)
                .await?;
        Ok(OpHandle::one(
            pending,
            super::check(peer, op, None),
            handle::acked,
        ))
    }

    /// Blocking [`Rank::put_signal_nb`]: returns once data and signal are
    /// applied at the target.
    pub async fn put_signal(
        &self,
        peer: u32,
        at: (WindowId, u64),
        data: &[u8],
        signal_at: (WindowId, u64),
        signal: u64,
        signal_op: NotifyOp,
    ) -> Result<()> {
        self.put_signal_nb(peer, at, data, signal_at, signal, signal_op)
            .await?
            .wait()
            .await
    }
}
