//! The device's collectives, synchronised through the signal the caller
//! gives, as in the seed (`pld.tensor.barrier(signal)`,
//! `pld.tensor.allreduce(target, signal, op, mode)`, ...): the result lands
//! in the caller's window view, and the signal's cells carry every
//! cross-rank ordering.
//!
//! **Signals are self-clearing credits.** A notify adds 1 to a cell of the
//! peer's signal; the owner waits for the cell to reach 1 and takes the
//! credit back (a local add of −1, no message). A cell thus returns to 0
//! once each arrival it expects is consumed, so one signal serves any
//! number of consecutive calls — a credit that arrives early (a fast
//! rank already in the next call) waits in the cell for its turn. This is
//! the seed's credit-barrier protocol; its older single-shot form
//! (monotonic cells, a fresh signal per call) is the special case of one
//! use.
//!
//! **Misuse is named before anything is sent:** a signal of the wrong
//! shape (too few rows or columns for the call and the world size), and
//! one signal shared by two collectives in flight at once on a rank.
//!
//! Every rank calls the same collectives in the same order with views of
//! the same buffers (as in MPI). Message counts are in each file's header
//! and in `docs/device.md`; `tests/device.rs` checks them.

mod allreduce;
mod barrier;
mod data;
mod ragged;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::tensor::{DistributedTensor, Shape2};
use pld_proto::lock::Locked;
use pld_proto::{Cmp, NotifyOp, Rma, Scalar};

/// `⌈log₂ p⌉`: the dissemination barrier's rounds.
pub(crate) fn rounds(p: u32) -> u32 {
    p.next_power_of_two().trailing_zeros()
}

/// Elements of chunk `c` when `n` elements split into `p` chunks.
pub(crate) fn chunk(n: u64, p: u64, c: u64) -> std::ops::Range<u64> {
    (c * n / p)..((c + 1) * n / p)
}

/// A signal a collective holds until it returns; dropping it frees the
/// signal for the next call.
pub(crate) struct SignalUse<'d, R: Rma> {
    dev: &'d Device<R>,
    key: (String, u64, u64, &'static str),
}

impl<R: Rma> Drop for SignalUse<'_, R> {
    fn drop(&mut self) {
        let mut held = self.dev.signals().locked();
        if let Some(i) = held.iter().position(|k| *k == self.key) {
            held.swap_remove(i);
        }
    }
}

impl<R: Rma> Device<R> {
    /// Checks `signal`'s shape for `call` (at least `want` cells) and
    /// takes it for the call's duration: a second collective on an
    /// overlapping signal meanwhile is refused.
    pub(crate) fn take_signal(
        &self,
        call: &'static str,
        signal: &DistributedTensor<i32>,
        want: Shape2,
        why: &'static str,
    ) -> Result<SignalUse<'_, R>> {
        let [rows, cols] = signal.shape();
        if rows < want[0] || cols < want[1] {
            return Err(Error::SignalShape {
                call,
                name: signal.name().into(),
                rows,
                cols,
                want_rows: want[0],
                want_cols: want[1],
                why,
            });
        }
        let start = signal.base();
        let end = start + rows * cols * 4;
        let mut held = self.signals().locked();
        if let Some((_, _, _, other)) = held
            .iter()
            .find(|(w, s, e, _)| w == signal.window() && *s < end && start < *e)
        {
            return Err(Error::SignalInUse {
                call,
                name: signal.name().into(),
                other,
            });
        }
        let key = (signal.window().to_string(), start, end, call);
        held.push(key.clone());
        Ok(SignalUse { dev: self, key })
    }

    /// Gives `peer` one credit in cell `at` of its `signal`.
    pub(crate) async fn arrive(
        &self,
        signal: &DistributedTensor<i32>,
        peer: u32,
        at: Shape2,
    ) -> Result<()> {
        self.notify(signal, peer, at, 1, NotifyOp::AtomicAdd).await
    }

    /// Waits for a credit in this rank's cell `at` (from rank `from`, in
    /// `step` of `call`) and takes it back; the error at the deadline
    /// names all of them.
    pub(crate) async fn consume(
        &self,
        call: &'static str,
        step: &str,
        signal: &DistributedTensor<i32>,
        at: Shape2,
        from: u32,
    ) -> Result<()> {
        let off = self.signal_offset(call, signal, at)?;
        let win = self.window_id(signal.window())?;
        let me = self.rank();
        self.rma()
            .wait(win, off, Cmp::Ge, 1)
            .await
            .map_err(|e| Error::Rma {
                rank: me,
                // The device's barrier is waits on signal cells: a rank that
                // never arrives is a barrier's timeout to the program.
                reason: match (call, pld_proto::rma::Reason::reason(&e)) {
                    ("barrier", "WAIT_TIMEOUT") => "BARRIER_TIMEOUT".into(),
                    (_, reason) => reason.into(),
                },
                message: format!(
                    "{call} on signal '{}', {step}: rank {from} never arrived at cell [{}, {}]: {e}",
                    signal.name(),
                    at[0],
                    at[1]
                ),
            })?;
        self.rma()
            .notify(me, win, off, -1, NotifyOp::AtomicAdd)
            .await
            .map_err(self.rma_err())
    }

    /// This rank's view `dt`, read whole (no message).
    pub(crate) async fn own<T: Scalar>(&self, dt: &DistributedTensor<T>) -> Result<Vec<T>> {
        Ok(self.read_own(dt).await?.data)
    }

    /// Elements `range` of `peer`'s `dt` (contiguous): one get.
    pub(crate) async fn fetch<T: Scalar>(
        &self,
        call: &'static str,
        dt: &DistributedTensor<T>,
        peer: u32,
        range: std::ops::Range<u64>,
    ) -> Result<Vec<T>> {
        self.check_peer(call, peer)?;
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let size = T::DTYPE.size() as u64;
        let win = self.window_id(dt.window())?;
        let bytes = self
            .rma()
            .get(
                peer,
                win,
                dt.base() + range.start * size,
                (range.end - range.start) * size,
            )
            .await
            .map_err(self.rma_err())?;
        Ok(pld_proto::dtype::from_bytes(&bytes))
    }

    /// Elements `range` of every rank's `dt`, folded with `op` in rank order
    /// (so every rank computes bit-identical floats): one get per peer.
    pub(crate) async fn reduce_all<T: Scalar>(
        &self,
        call: &'static str,
        dt: &DistributedTensor<T>,
        range: std::ops::Range<u64>,
        op: pld_proto::ReduceOp,
    ) -> Result<Vec<T>> {
        let mut acc = self.fetch(call, dt, 0, range.clone()).await?;
        for r in 1..self.world_size() {
            let v = self.fetch(call, dt, r, range.clone()).await?;
            for (a, b) in acc.iter_mut().zip(v) {
                *a = op.apply(*a, b);
            }
        }
        Ok(acc)
    }

    /// Writes `data` at element `at` of `peer`'s `dt` (contiguous): one
    /// put, or none for this rank's own view.
    pub(crate) async fn deposit<T: Scalar>(
        &self,
        call: &'static str,
        dt: &DistributedTensor<T>,
        peer: u32,
        at: u64,
        data: &[T],
    ) -> Result<()> {
        self.check_peer(call, peer)?;
        if data.is_empty() {
            return Ok(());
        }
        let win = self.window_id(dt.window())?;
        self.rma()
            .put(
                peer,
                win,
                dt.base() + at * T::DTYPE.size() as u64,
                &pld_proto::dtype::to_bytes(data),
            )
            .await
            .map_err(self.rma_err())
    }
}
