//! The system tier: world size, communication contexts, notify, wait,
//! test, barrier and quiet.

use super::*;
use crate::error::{Error, Result};
use crate::tensor::{DistributedTensor, Shape2, check_region};
use pld_proto::Scalar;
use pld_proto::lock::Locked;
use pld_proto::{Cmp, Dtype, NotifyOp, Rma};

/// A condition `defer_wait` registered.
#[derive(Debug)]
pub(crate) struct Deferred {
    signal: String,
    window: String,
    offset: u64,
    at: Shape2,
    expected: i32,
}

impl<R: Rma> Device<R> {
    /// The communication context of a window view (`pld.get_comm_ctx`).
    ///
    /// ```no_run
    /// # async fn f(dev: &pld_sim::Device<pld_server::Rank>) {
    /// let data = dev.alloc::<f32>("data", "data", [1, 8]).unwrap();
    /// let ctx = dev.get_comm_ctx(&data);
    /// assert!(pld_sim::rank(ctx) < pld_sim::nranks(ctx));
    /// # }
    /// ```
    ///
    /// Taking a `&DistributedTensor` makes a local Tensor a type error:
    ///
    /// ```compile_fail
    /// # async fn f(dev: &pld_sim::Device<pld_server::Rank>) {
    /// let x = pld_sim::Tensor::<f32>::zeros("x", [1, 8]);
    /// dev.get_comm_ctx(&x); // a Tensor is not a DistributedTensor
    /// # }
    /// ```
    pub fn get_comm_ctx<T: Scalar>(&self, _dt: &DistributedTensor<T>) -> CommCtx {
        CommCtx {
            rank: self.rma.rank(),
            nranks: self.rma.nranks(),
        }
    }

    /// `get_comm_ctx` on an operand of any kind: a local Tensor or a Tile
    /// is refused with the fix.
    pub fn get_comm_ctx_of<'a, T: Scalar + 'a>(
        &self,
        op: impl Into<Operand<'a, T>>,
    ) -> Result<CommCtx> {
        self.distributed("get_comm_ctx", op)
            .map(|dt| self.get_comm_ctx(dt))
    }

    /// The window view `call` needs, from an operand of any kind (as a
    /// dynamic language passes it): a local Tensor or a Tile, which no peer
    /// can reach, is refused with the fix.
    pub fn distributed<'a, T: Scalar + 'a>(
        &self,
        call: &str,
        op: impl Into<Operand<'a, T>>,
    ) -> Result<&'a DistributedTensor<T>> {
        match op.into() {
            Operand::Distributed(dt) => Ok(dt),
            Operand::Tensor(t) => Err(Error::NotDistributed {
                call: call.into(),
                what: format!("'{}' is a local Tensor", t.name),
            }),
            Operand::Tile(_) => Err(Error::NotDistributed {
                call: call.into(),
                what: "its operand is a tile, on-chip data".into(),
            }),
        }
    }

    pub(crate) fn signal_offset<T: Scalar>(
        &self,
        call: &'static str,
        signal: &DistributedTensor<T>,
        at: Shape2,
    ) -> Result<u64> {
        if T::DTYPE != Dtype::Int32 {
            return Err(Error::DtypeMismatch {
                call,
                name: signal.name.clone(),
                expected: Dtype::Int32,
                found: T::DTYPE,
                fix: "signal cells are int32: allocate the signal view as DistributedTensor<i32>",
            });
        }
        check_region(call, &signal.name, signal.shape, at, [1, 1])?;
        Ok(signal.byte_offset(at))
    }

    /// Sets or atomically adds `value` to `peer`'s int32 cell `at` of
    /// `signal` (`pld.system.notify`).
    pub async fn notify<T: Scalar>(
        &self,
        signal: &DistributedTensor<T>,
        peer: u32,
        at: Shape2,
        value: i32,
        op: NotifyOp,
    ) -> Result<()> {
        let off = self.signal_offset("notify", signal, at)?;
        self.check_peer("notify", peer)?;
        let win = self.window_id(&signal.window)?;
        self.rma
            .notify(peer, win, off, value, op)
            .await
            .map_err(self.rma_err())
    }

    /// Waits until this rank's cell `at` of `signal` satisfies `cmp
    /// expected` (`pld.system.wait`); fails at the sync timeout naming the
    /// cell, the expected and the last value seen.
    pub async fn wait<T: Scalar>(
        &self,
        signal: &DistributedTensor<T>,
        at: Shape2,
        expected: i32,
        cmp: Cmp,
    ) -> Result<i32> {
        let off = self.signal_offset("wait", signal, at)?;
        let win = self.window_id(&signal.window)?;
        self.rma
            .wait(win, off, cmp, expected)
            .await
            .map_err(|e| Error::Rma {
                rank: self.rank(),
                reason: pld_proto::rma::Reason::reason(&e).into(),
                message: format!("wait on '{}'[{}, {}]: {e}", signal.name, at[0], at[1]),
            })
    }

    /// Whether this rank's cell satisfies `cmp expected` now.
    pub async fn test<T: Scalar>(
        &self,
        signal: &DistributedTensor<T>,
        at: Shape2,
        expected: i32,
        cmp: Cmp,
    ) -> Result<bool> {
        let off = self.signal_offset("test", signal, at)?;
        let win = self.window_id(&signal.window)?;
        self.rma
            .test(win, off, cmp, expected)
            .await
            .map_err(self.rma_err())
    }

    /// `pld.system.defer_wait`: registers that this kernel is complete only
    /// once this rank's cell `at` of `signal` is `>= expected`, without
    /// blocking now. The launcher waits for every registered condition
    /// after the kernel returns ([`Device::complete`]), with the sync
    /// deadline; work that depends on the condition belongs after that.
    /// Only [`Cmp::Ge`] is accepted, as in the seed.
    pub fn defer_wait(
        &self,
        signal: &DistributedTensor<i32>,
        at: Shape2,
        expected: i32,
        cmp: Cmp,
    ) -> Result<()> {
        let offset = self.signal_offset("defer_wait", signal, at)?;
        if cmp != Cmp::Ge {
            return Err(Error::Usage(format!(
                "defer_wait on '{}': only WaitCmp.Ge is allowed (a deferred condition must stay true once met); \
                 use wait for {cmp:?}",
                signal.name
            )));
        }
        self.deferred.locked().push(Deferred {
            signal: signal.name.clone(),
            window: signal.window.clone(),
            offset,
            at,
            expected,
        });
        Ok(())
    }

    /// Waits for every condition `defer_wait` registered; the launcher
    /// calls it when the kernel returns. Fails naming the first cell that
    /// did not reach its value by the deadline.
    pub async fn complete(&self) -> Result<()> {
        let pending = std::mem::take(&mut *self.deferred.locked());
        for d in pending {
            let win = self.window_id(&d.window)?;
            self.rma
                .wait(win, d.offset, Cmp::Ge, d.expected)
                .await
                .map_err(|e| Error::Rma {
                    rank: self.rank(),
                    reason: pld_proto::rma::Reason::reason(&e).into(),
                    message: format!(
                        "defer_wait on '{}'[{}, {}] >= {} never held: {e}",
                        d.signal, d.at[0], d.at[1], d.expected
                    ),
                })?;
        }
        Ok(())
    }

    /// Waits for every op this rank issued.
    pub async fn quiet(&self) -> Result<()> {
        self.rma.quiet().await.map_err(self.rma_err())
    }

    /// [`Device::quiet`] for at most `timeout`: then it fails naming the
    /// ops still outstanding.
    pub async fn quiet_within(&self, timeout: std::time::Duration) -> Result<()> {
        self.rma.quiet_within(timeout).await.map_err(self.rma_err())
    }
}
