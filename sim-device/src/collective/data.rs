//! Broadcast, all-gather, reduce-scatter and all-to-all on window views,
//! each synchronised through the caller's `[P, 1]` int32 signal (the
//! seed's `pld.tensor.broadcast(target, signal, root=)`,
//! `allgather(local, target, signal)`, `reduce_scatter(target, signal,
//! op=)`, `all_to_all(input, target, signal)`).
//!
//! | call | how | messages in all |
//! |---|---|---|
//! | broadcast | root credits each rank at `[root, 0]`; each pulls root's target and credits root back at `[r, 0]` | 2·(P−1) notifies, P−1 gets |
//! | allgather | push: rank r puts its block into row block r of every peer's target, then a barrier | P·(P−1) puts, P·⌈log₂P⌉ notifies |
//! | reduce_scatter | barrier; rank r pulls block r of every peer's target and folds them in rank order; barrier; stores block r | P·(P−1) gets, 2·P·⌈log₂P⌉ notifies |
//! | all_to_all | push: block j of rank r's input goes to block r of rank j's target, then a barrier | P·(P−1) puts, P·⌈log₂P⌉ notifies |
//!
//! On return this rank's target holds its result and every buffer passed
//! may be reused. The push-based calls write into the peers' targets, so,
//! as in the seed, a target read after one push-based call must not be
//! the target of the next one without a barrier between.

use crate::device::{Device, Src};
use crate::error::{Error, Result};
use crate::tensor::DistributedTensor;
use pld_proto::{ReduceOp, Rma, Scalar};

const ONE_ROW: &str = "one row per rank";

impl<R: Rma> Device<R> {
    /// Every rank's `target` ends holding `root`'s (staged by root before
    /// the call; the others' contents are ignored).
    pub async fn broadcast<T: Scalar>(
        &self,
        target: &DistributedTensor<T>,
        signal: &DistributedTensor<i32>,
        root: u32,
    ) -> Result<()> {
        const CALL: &str = "broadcast";
        let p = self.world_size();
        self.check_peer(CALL, root)?;
        let _held = self.take_signal(CALL, signal, [u64::from(p), 1], ONE_ROW)?;
        let me = self.rank();
        let root_u = u64::from(root);
        self.quiet().await?;
        if me == root {
            for r in (0..p).filter(|r| *r != root) {
                self.arrive(signal, r, [root_u, 0]).await?;
            }
            for r in (0..p).filter(|r| *r != root) {
                self.consume(
                    CALL,
                    "root waiting for every rank's read",
                    signal,
                    [u64::from(r), 0],
                    r,
                )
                .await?;
            }
            return Ok(());
        }
        self.consume(CALL, "waiting for root's data", signal, [root_u, 0], root)
            .await?;
        let n = target.shape()[0] * target.shape()[1];
        let v = self.fetch(CALL, target, root, 0..n).await?;
        self.deposit(CALL, target, me, 0, &v).await?;
        self.arrive(signal, root, [u64::from(me), 0]).await
    }

    /// Every rank's `target` (`[P·rows, cols]`) ends holding every rank's
    /// `local` (`[rows, cols]`, a tensor or this rank's window view),
    /// stacked by rank.
    pub async fn allgather<'a, T: Scalar>(
        &self,
        local: impl Into<Src<'a, T>>,
        target: &DistributedTensor<T>,
        signal: &DistributedTensor<i32>,
    ) -> Result<()> {
        const CALL: &str = "allgather";
        let block = self.block_of(CALL, local.into(), target).await?;
        self.push_then_barrier(CALL, target, signal, &block, |_| 0..block.len())
            .await
    }

    /// `input` (`[P·b, cols]`): block j goes to rank j, and this rank's
    /// `target` (same shape) ends holding block r of every rank's input,
    /// stacked by sender.
    pub async fn all_to_all<'a, T: Scalar>(
        &self,
        input: impl Into<Src<'a, T>>,
        target: &DistributedTensor<T>,
        signal: &DistributedTensor<i32>,
    ) -> Result<()> {
        const CALL: &str = "all_to_all";
        let input = self.src_data(input.into()).await?;
        if input.1 != target.shape() {
            return Err(Error::ShapeMismatch {
                call: CALL,
                a_rows: input.1[0],
                a_cols: input.1[1],
                b_rows: target.shape()[0],
                b_cols: target.shape()[1],
            });
        }
        let b = self.blocks(CALL, target)?;
        let data = input.0;
        let b = b as usize;
        self.push_then_barrier(CALL, target, signal, &data, |j| {
            j as usize * b..(j as usize + 1) * b
        })
        .await
    }

    /// `target` is `[P·b, cols]`, staged by every rank; block r of this
    /// rank's target ends holding the elementwise `op` of every rank's
    /// block r (the other blocks are left as staged).
    pub async fn reduce_scatter<T: Scalar>(
        &self,
        target: &DistributedTensor<T>,
        signal: &DistributedTensor<i32>,
        op: ReduceOp,
    ) -> Result<()> {
        const CALL: &str = "reduce_scatter";
        let p = self.world_size();
        let b = self.blocks(CALL, target)?;
        let _held = self.take_signal(CALL, signal, [u64::from(p), 1], ONE_ROW)?;
        let me = u64::from(self.rank());
        self.quiet().await?;
        self.disseminate(CALL, signal, 0).await?;
        let acc = self
            .reduce_all(CALL, target, me * b..(me + 1) * b, op)
            .await?;
        self.disseminate(CALL, signal, 0).await?;
        self.deposit(CALL, target, self.rank(), me * b, &acc).await
    }

    /// Puts `data[block(j)]` into block r of rank j's `target` for every
    /// rank j, then a barrier on `signal`.
    async fn push_then_barrier<T: Scalar>(
        &self,
        call: &'static str,
        target: &DistributedTensor<T>,
        signal: &DistributedTensor<i32>,
        data: &[T],
        block: impl Fn(u32) -> std::ops::Range<usize>,
    ) -> Result<()> {
        let p = self.world_size();
        let b = self.blocks(call, target)?;
        let _held = self.take_signal(call, signal, [u64::from(p), 1], ONE_ROW)?;
        let me = self.rank();
        for k in 0..p {
            let j = self.peer_next(i64::from(k));
            self.deposit(call, target, j, u64::from(me) * b, &data[block(j)])
                .await?;
        }
        self.quiet().await?;
        self.disseminate(call, signal, 0).await
    }

    /// Elements per rank block of `target` (`[P·b, cols]`).
    fn blocks<T: Scalar>(&self, call: &'static str, target: &DistributedTensor<T>) -> Result<u64> {
        let p = u64::from(self.world_size());
        let [rows, cols] = target.shape();
        if rows % p != 0 {
            return Err(Error::Usage(format!(
                "{call}: the target '{}' has {rows} rows, which do not split into {p} equal blocks \
                 (one per rank); give it P·rows rows",
                target.name()
            )));
        }
        Ok(rows / p * cols)
    }

    /// `local`'s data, checked to be one block of `target`.
    async fn block_of<T: Scalar>(
        &self,
        call: &'static str,
        local: Src<'_, T>,
        target: &DistributedTensor<T>,
    ) -> Result<Vec<T>> {
        let (data, shape) = self.src_data(local).await?;
        let p = u64::from(self.world_size());
        let want = [shape[0] * p, shape[1]];
        if want != target.shape() {
            return Err(Error::Usage(format!(
                "{call}: the target '{}' is {:?}, but {p} blocks of the local {:?} need {:?}",
                target.name(),
                target.shape(),
                shape,
                want
            )));
        }
        Ok(data)
    }

    async fn src_data<T: Scalar>(&self, src: Src<'_, T>) -> Result<(Vec<T>, [u64; 2])> {
        Ok(match src {
            Src::Tensor(t) => (t.data().to_vec(), t.shape()),
            Src::Window(w) => (self.own(w).await?, w.shape()),
        })
    }
}
