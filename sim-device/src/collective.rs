//! The device's collectives: [`pld_proto::collective`] on tensors, with a
//! symmetric scratch view of window `data` that grows on demand. Every rank
//! must call the same collectives in the same order (as in MPI).

use crate::device::Device;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use pld_proto::collective::{self as coll, Algo, Scratch};
use pld_proto::{ReduceOp, Rma, Scalar};

impl<R: Rma> Device<R> {
    fn scratch_of<T: Scalar>(&self, elems: u64) -> Result<Scratch<R::Window>> {
        let dt = self.scratch::<T>(elems)?;
        let window = self.rma().window(dt.window()).map_err(|e| Error::Rma {
            rank: self.rank(),
            message: e.to_string(),
        })?;
        Ok(Scratch {
            window,
            base: dt.base(),
            bytes: elems * T::DTYPE.size() as u64,
        })
    }

    fn coll_err(&self) -> impl Fn(coll::Error<R::Error>) -> Error + '_ {
        move |e| match e {
            coll::Error::Invalid { .. } => Error::Usage(e.to_string()),
            e => Error::Rma {
                rank: self.rank(),
                message: e.to_string(),
            },
        }
    }

    /// Every rank ends with the elementwise `op` of every rank's `x`.
    pub async fn allreduce<T: Scalar>(
        &self,
        x: &Tensor<T>,
        op: ReduceOp,
        algo: Algo,
    ) -> Result<Tensor<T>> {
        let n = x.data().len() as u64;
        let elems = match algo {
            Algo::Mesh => n * u64::from(self.world_size()),
            Algo::Ring => n,
        };
        let s = self.scratch_of::<T>(elems)?;
        let data = coll::allreduce(self.rma(), &s, x.data(), op, algo)
            .await
            .map_err(self.coll_err())?;
        Tensor::new(x.name(), x.shape(), data)
    }

    /// Every rank ends with `root`'s `x` (the others' `x` gives the shape).
    pub async fn broadcast<T: Scalar>(&self, x: &Tensor<T>, root: u32) -> Result<Tensor<T>> {
        let s = self.scratch_of::<T>(x.data().len() as u64)?;
        let data = coll::broadcast(self.rma(), &s, x.data(), root)
            .await
            .map_err(self.coll_err())?;
        Tensor::new(x.name(), x.shape(), data)
    }

    /// Every rank ends with every rank's `x`, stacked by rank: `[P·rows, cols]`.
    pub async fn allgather<T: Scalar>(&self, x: &Tensor<T>) -> Result<Tensor<T>> {
        let p = u64::from(self.world_size());
        let s = self.scratch_of::<T>(p * x.data().len() as u64)?;
        let data = coll::allgather(self.rma(), &s, x.data())
            .await
            .map_err(self.coll_err())?;
        let [rows, cols] = x.shape();
        Tensor::new(x.name(), [rows * p, cols], data)
    }

    /// `x` is `[P·b, cols]`; rank r ends with block r (`[b, cols]`) of the
    /// elementwise `op` of every rank's `x`.
    pub async fn reduce_scatter<T: Scalar>(
        &self,
        x: &Tensor<T>,
        op: ReduceOp,
    ) -> Result<Tensor<T>> {
        let b = self.blocks("reduce_scatter", x.shape()[0])?;
        let s = self.scratch_of::<T>(x.data().len() as u64)?;
        let data = coll::reduce_scatter(self.rma(), &s, x.data(), op)
            .await
            .map_err(self.coll_err())?;
        Tensor::new(x.name(), [b, x.shape()[1]], data)
    }

    /// `x` is `[P·b, cols]`; block j goes to rank j, and rank r ends with
    /// the blocks every rank sent it, stacked by sender.
    pub async fn all_to_all<T: Scalar>(&self, x: &Tensor<T>) -> Result<Tensor<T>> {
        self.blocks("all_to_all", x.shape()[0])?;
        let s = self.scratch_of::<T>(x.data().len() as u64)?;
        let data = coll::all_to_all(self.rma(), &s, x.data())
            .await
            .map_err(self.coll_err())?;
        Tensor::new(x.name(), x.shape(), data)
    }

    /// `send[j]` (any length) goes to rank j; returns what each rank sent
    /// this one, by sender.
    pub async fn all_to_all_v<T: Scalar>(&self, send: &[Vec<T>]) -> Result<Vec<Vec<T>>> {
        // Learn every length first, so that every rank sizes the scratch
        // alike (it must be symmetric) for what the busiest rank receives.
        let p = self.world_size() as usize;
        let s0 = self.scratch_of::<i64>((p * p) as u64)?;
        let m = coll::all_to_all_v_counts(self.rma(), &s0, send)
            .await
            .map_err(self.coll_err())?;
        let most = coll::all_to_all_v_largest(&m, p) as u64;
        let s = self.scratch_of::<T>(most.max(1))?;
        coll::all_to_all_v_with(self.rma(), &s, send, &m)
            .await
            .map_err(self.coll_err())
    }

    fn blocks(&self, call: &str, rows: u64) -> Result<u64> {
        let p = u64::from(self.world_size());
        if rows % p != 0 {
            return Err(Error::Usage(format!(
                "{call}: {rows} rows do not split into {p} equal blocks"
            )));
        }
        Ok(rows / p)
    }
}
