//! The collectives of the client plane: every rank's program calls the
//! same one, in the same order, through its own daemon (as in MPI); the
//! daemons run it among themselves. Data is little-endian `dtype`
//! elements; the typed forms take and return slices of elements.

use crate::client::Client;
use crate::error::Result;
use bytes::Bytes;
use pld_proto::collective::Algo;
use pld_proto::dtype::{from_bytes, to_bytes};
use pld_proto::v1 as pb;
use pld_proto::{Dtype, ReduceOp, Scalar};

fn wire_op(op: ReduceOp) -> i32 {
    (match op {
        ReduceOp::Sum => pb::ReduceOp::Sum,
        ReduceOp::Max => pb::ReduceOp::Max,
        ReduceOp::Min => pb::ReduceOp::Min,
        ReduceOp::Prod => pb::ReduceOp::Prod,
    }) as i32
}

impl Client {
    /// Every rank ends with the elementwise `op` of every rank's `data`.
    pub async fn all_reduce_bytes(
        &self,
        dtype: Dtype,
        data: &[u8],
        op: ReduceOp,
        algo: Algo,
    ) -> Result<Bytes> {
        let req = pb::AllReduceRequest {
            dtype: dtype as i32,
            data: Bytes::copy_from_slice(data),
            op: wire_op(op),
            algo: (match algo {
                Algo::Ring => pb::Algo::Ring,
                Algo::Mesh => pb::Algo::Mesh,
            }) as i32,
        };
        let r = self.call(req, |mut g, r| async move { g.all_reduce(r).await });
        Ok(r.await?.data)
    }

    /// Every rank ends with `root`'s `data`.
    pub async fn broadcast_bytes(&self, dtype: Dtype, data: &[u8], root: u32) -> Result<Bytes> {
        let req = pb::BroadcastRequest {
            dtype: dtype as i32,
            data: Bytes::copy_from_slice(data),
            root,
        };
        let r = self.call(req, |mut g, r| async move { g.broadcast(r).await });
        Ok(r.await?.data)
    }

    /// Every rank ends with every rank's `data`, concatenated by rank.
    pub async fn all_gather_bytes(&self, dtype: Dtype, data: &[u8]) -> Result<Bytes> {
        let req = pb::AllGatherRequest {
            dtype: dtype as i32,
            data: Bytes::copy_from_slice(data),
        };
        let r = self.call(req, |mut g, r| async move { g.all_gather(r).await });
        Ok(r.await?.data)
    }

    /// `data` is P equal blocks; rank r ends with block r of the `op` of
    /// every rank's `data`.
    pub async fn reduce_scatter_bytes(
        &self,
        dtype: Dtype,
        data: &[u8],
        op: ReduceOp,
    ) -> Result<Bytes> {
        let req = pb::ReduceScatterRequest {
            dtype: dtype as i32,
            data: Bytes::copy_from_slice(data),
            op: wire_op(op),
        };
        let r = self.call(req, |mut g, r| async move { g.reduce_scatter(r).await });
        Ok(r.await?.data)
    }

    /// `data` is P equal blocks; block j goes to rank j, and each rank ends
    /// with the blocks it was sent, by sender.
    pub async fn all_to_all_bytes(&self, dtype: Dtype, data: &[u8]) -> Result<Bytes> {
        let req = pb::AllToAllRequest {
            dtype: dtype as i32,
            data: Bytes::copy_from_slice(data),
        };
        let r = self.call(req, |mut g, r| async move { g.all_to_all(r).await });
        Ok(r.await?.data)
    }

    /// [`Client::all_reduce_bytes`] on elements.
    pub async fn all_reduce<T: Scalar>(&self, x: &[T], op: ReduceOp, algo: Algo) -> Result<Vec<T>> {
        let out = self
            .all_reduce_bytes(T::DTYPE, &to_bytes(x), op, algo)
            .await?;
        Ok(from_bytes(&out))
    }

    /// [`Client::broadcast_bytes`] on elements.
    pub async fn broadcast<T: Scalar>(&self, x: &[T], root: u32) -> Result<Vec<T>> {
        let out = self.broadcast_bytes(T::DTYPE, &to_bytes(x), root).await?;
        Ok(from_bytes(&out))
    }

    /// [`Client::all_gather_bytes`] on elements.
    pub async fn all_gather<T: Scalar>(&self, x: &[T]) -> Result<Vec<T>> {
        let out = self.all_gather_bytes(T::DTYPE, &to_bytes(x)).await?;
        Ok(from_bytes(&out))
    }

    /// [`Client::reduce_scatter_bytes`] on elements.
    pub async fn reduce_scatter<T: Scalar>(&self, x: &[T], op: ReduceOp) -> Result<Vec<T>> {
        let out = self
            .reduce_scatter_bytes(T::DTYPE, &to_bytes(x), op)
            .await?;
        Ok(from_bytes(&out))
    }

    /// [`Client::all_to_all_bytes`] on elements.
    pub async fn all_to_all<T: Scalar>(&self, x: &[T]) -> Result<Vec<T>> {
        let out = self.all_to_all_bytes(T::DTYPE, &to_bytes(x)).await?;
        Ok(from_bytes(&out))
    }
}
