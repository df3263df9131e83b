//! `pld.tensor.allreduce(target, signal, op, mode)`: every rank's `target`
//! view (staged by the caller) ends holding the elementwise `op` of every
//! rank's — in place, synchronised through `signal`.
//!
//! **Mesh** (`[P, 1]` signal): a dissemination barrier (everyone staged),
//! every rank pulls every peer's target and folds them in rank order (so
//! every rank computes bit-identical floats), a second barrier (nobody
//! reads a target any more), then each stores its result in its own
//! target. Messages: 2·P·⌈log₂P⌉ notifies and P·(P−1) gets.
//!
//! **Ring** (`[2(P−1), P]` signal, one row per round, as the seed's step
//! 10): pull-based reduce-scatter then all-gather over P chunks, each rank
//! only ever reading its left neighbour. Round s of the reduce-scatter:
//! wait for the left neighbour's credit in `[s, left]`, pull its partial
//! chunk (r−1−s) mod P, add this rank's own, store it in place, and give
//! the right neighbour a credit in `[s+1, r]` (row P−1, the first
//! all-gather row, once this rank holds its reduced chunk (r+1) mod P).
//! All-gather round s: wait in `[P−1+s, left]`, pull chunk (r−s) mod P,
//! store it, pass a credit on. The seed's schedule lets a rank overwrite
//! a chunk in the all-gather that a slow right neighbour has yet to read
//! in the reduce-scatter (P ≥ 3); here each rank acknowledges its left
//! neighbour after its last reduce-scatter read (cell `[0, left]` of the
//! neighbour's own column, which ready credits never use) and after its
//! last all-gather read (`[1, left]`), and waits for its right neighbour's
//! acknowledgements before overwriting and before returning. Messages:
//! 2·P notifies per rank (2·P² in all) and 2·(P−1) gets per rank.

use super::chunk;
use crate::device::Device;
use crate::error::Result;
use crate::tensor::DistributedTensor;
use pld_proto::collective::Algo;
use pld_proto::{ReduceOp, Rma, Scalar};

impl<R: Rma> Device<R> {
    /// Every rank's `target` ends holding the elementwise `op` of every
    /// rank's (`pld.tensor.allreduce(target, signal, op=..., mode=...)`).
    /// `signal` is `[nranks, 1]` for mesh, `[2·(nranks−1), nranks]` for
    /// ring; it may be reused by the next call.
    pub async fn allreduce<T: Scalar>(
        &self,
        target: &DistributedTensor<T>,
        signal: &DistributedTensor<i32>,
        op: ReduceOp,
        mode: Algo,
    ) -> Result<()> {
        match mode {
            Algo::Mesh => self.allreduce_mesh(target, signal, op).await,
            Algo::Ring => self.allreduce_ring(target, signal, op).await,
        }
    }

    async fn allreduce_mesh<T: Scalar>(
        &self,
        target: &DistributedTensor<T>,
        signal: &DistributedTensor<i32>,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "allreduce";
        let p = self.world_size();
        let _held = self.take_signal(CALL, signal, [u64::from(p), 1], "mesh: one row per rank")?;
        let n = target.shape()[0] * target.shape()[1];
        self.quiet().await?;
        self.disseminate(CALL, signal, 0).await?;
        let acc = self.reduce_all(CALL, target, 0..n, op).await?;
        self.disseminate(CALL, signal, 0).await?;
        let me = self.rank();
        self.deposit(CALL, target, me, 0, &acc).await
    }

    async fn allreduce_ring<T: Scalar>(
        &self,
        target: &DistributedTensor<T>,
        signal: &DistributedTensor<i32>,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "allreduce";
        let p = self.world_size();
        let p64 = u64::from(p);
        let _held = self.take_signal(
            CALL,
            signal,
            [2 * (p64 - 1), p64],
            "ring: one row per round, one column per rank",
        )?;
        if p == 1 {
            return Ok(());
        }
        let n = target.shape()[0] * target.shape()[1];
        let (me, left, right) = (self.rank(), self.peer_prev(1), self.peer_next(1));
        let (mu, lu) = (u64::from(me), u64::from(left));
        self.quiet().await?;
        // Reduce-scatter.
        self.arrive(signal, right, [0, mu]).await?;
        for s in 0..p64 - 1 {
            let step = format!("ring reduce-scatter round {s}");
            self.consume(CALL, &step, signal, [s, lu], left).await?;
            let c = chunk(n, p64, u64::from(self.peer_prev(1 + s as i64)));
            let theirs = self.fetch(CALL, target, left, c.clone()).await?;
            let mine = self.fetch(CALL, target, me, c.clone()).await?;
            let sum: Vec<T> = mine
                .into_iter()
                .zip(theirs)
                .map(|(a, b)| op.apply(b, a))
                .collect();
            self.deposit(CALL, target, me, c.start, &sum).await?;
            self.arrive(signal, right, [s + 1, mu]).await?;
        }
        // The right neighbour has read all it reads of this target in the
        // reduce-scatter before the all-gather overwrites it.
        self.arrive(signal, left, [0, lu]).await?;
        let wait_right = "ring: the right neighbour finishing its reduce-scatter reads";
        self.consume(CALL, wait_right, signal, [0, mu], right)
            .await?;
        // All-gather.
        for s in 0..p64 - 1 {
            let step = format!("ring all-gather round {s}");
            self.consume(CALL, &step, signal, [p64 - 1 + s, lu], left)
                .await?;
            let c = chunk(n, p64, u64::from(self.peer_prev(s as i64)));
            let v = self.fetch(CALL, target, left, c.clone()).await?;
            self.deposit(CALL, target, me, c.start, &v).await?;
            if s + 2 < p64 {
                self.arrive(signal, right, [p64 + s, mu]).await?;
            }
        }
        self.arrive(signal, left, [1, lu]).await?;
        let wait_right = "ring: the right neighbour finishing its all-gather reads";
        self.consume(CALL, wait_right, signal, [1, mu], right).await
    }
}
