//! Collectives built on the primitives: every one is puts into a symmetric
//! scratch view of window `data`, barriers that order them, and local
//! reads and reductions. Every rank must call the same collectives in the
//! same order (as in MPI); the scratch is reused across calls, so each
//! collective ends with a barrier.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::scalar::{ReduceOp, Scalar};
use crate::tensor::{DistributedTensor, Tensor};
use pld_proto::Rma;
use pld_proto::dtype::{from_bytes, to_bytes};

/// How allreduce moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    /// Every rank puts its whole vector to every rank, which reduces all
    /// of them: one round, P − 1 puts of N per rank.
    Mesh,
    /// Reduce-scatter then allgather around the ring: 2(P − 1) rounds of
    /// N / P per rank — bandwidth-optimal.
    Ring,
}

impl Algo {
    pub fn parse(s: &str) -> Option<Algo> {
        match s {
            "mesh" => Some(Algo::Mesh),
            "ring" => Some(Algo::Ring),
            _ => None,
        }
    }
}

/// The bounds of chunk `c` of `n` elements split into `p` chunks.
fn chunk(n: usize, p: usize, c: usize) -> std::ops::Range<usize> {
    (c * n / p)..((c + 1) * n / p)
}

impl<R: Rma> Device<R> {
    fn rma_error(&self, e: R::Error) -> Error {
        Error::Rma {
            rank: self.rank(),
            message: e.to_string(),
        }
    }

    /// Puts `data` at element `at` of `peer`'s `dt`.
    async fn put_elems<T: Scalar>(
        &self,
        dt: &DistributedTensor<T>,
        peer: u32,
        at: u64,
        data: &[T],
    ) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let win = self
            .rma()
            .window(dt.window())
            .map_err(|e| self.rma_error(e))?;
        let off = dt.base() + at * T::DTYPE.size() as u64;
        self.rma()
            .put(peer, win, off, &to_bytes(data))
            .await
            .map_err(|e| self.rma_error(e))
    }

    /// Reads `len` elements at element `at` of this rank's `dt`.
    async fn read_elems<T: Scalar>(
        &self,
        dt: &DistributedTensor<T>,
        at: u64,
        len: usize,
    ) -> Result<Vec<T>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let win = self
            .rma()
            .window(dt.window())
            .map_err(|e| self.rma_error(e))?;
        let off = dt.base() + at * T::DTYPE.size() as u64;
        let bytes = self
            .rma()
            .get(self.rank(), win, off, (len * T::DTYPE.size()) as u64)
            .await
            .map_err(|e| self.rma_error(e))?;
        Ok(from_bytes(&bytes))
    }

    async fn sync(&self) -> Result<()> {
        self.rma().barrier().await.map_err(|e| self.rma_error(e))
    }

    /// Every rank ends with the elementwise `op` of every rank's `x`.
    pub async fn allreduce<T: Scalar>(
        &self,
        x: &Tensor<T>,
        op: ReduceOp,
        algo: Algo,
    ) -> Result<Tensor<T>> {
        match algo {
            Algo::Mesh => self.allreduce_mesh(x, op).await,
            Algo::Ring => self.allreduce_ring(x, op).await,
        }
    }

    async fn allreduce_mesh<T: Scalar>(&self, x: &Tensor<T>, op: ReduceOp) -> Result<Tensor<T>> {
        let (p, me, n) = (self.world_size(), self.rank(), x.data().len());
        let s = self.scratch::<T>(p as u64 * n as u64)?;
        for j in 0..p {
            self.put_elems(&s, j, me as u64 * n as u64, x.data())
                .await?;
        }
        self.sync().await?;
        let all = self.read_elems(&s, 0, p as usize * n).await?;
        self.sync().await?;
        let mut out = x.clone();
        for (i, v) in out.data_mut().iter_mut().enumerate() {
            *v = all[i];
            for r in 1..p as usize {
                *v = op.apply(*v, all[r * n + i]);
            }
        }
        Ok(out)
    }

    async fn allreduce_ring<T: Scalar>(&self, x: &Tensor<T>, op: ReduceOp) -> Result<Tensor<T>> {
        let (p, me, n) = (
            self.world_size() as usize,
            self.rank() as usize,
            x.data().len(),
        );
        let s = self.scratch::<T>(n as u64)?;
        let next = ((me + 1) % p) as u32;
        let mut acc = x.clone();
        // Reduce-scatter: after P − 1 steps rank r holds the full reduction
        // of chunk (r + 1) mod P.
        for k in 0..p - 1 {
            let send = chunk(n, p, (me + p - k) % p);
            self.put_elems(&s, next, send.start as u64, &acc.data()[send.clone()])
                .await?;
            self.sync().await?;
            let recv = chunk(n, p, (me + 2 * p - k - 1) % p);
            let got = self.read_elems(&s, recv.start as u64, recv.len()).await?;
            for (v, g) in acc.data_mut()[recv].iter_mut().zip(got) {
                *v = op.apply(g, *v);
            }
        }
        // Allgather: pass the reduced chunks around the ring.
        for k in 0..p - 1 {
            let send = chunk(n, p, (me + 1 + p - k) % p);
            self.put_elems(&s, next, send.start as u64, &acc.data()[send.clone()])
                .await?;
            self.sync().await?;
            let recv = chunk(n, p, (me + p - k) % p);
            let got = self.read_elems(&s, recv.start as u64, recv.len()).await?;
            acc.data_mut()[recv].copy_from_slice(&got);
        }
        self.sync().await?;
        Ok(acc)
    }

    /// Every rank ends with `root`'s `x` (the others' `x` gives the shape).
    pub async fn broadcast<T: Scalar>(&self, x: &Tensor<T>, root: u32) -> Result<Tensor<T>> {
        let (p, n) = (self.world_size(), x.data().len());
        if root >= p {
            return Err(Error::Usage(format!(
                "broadcast: root {root} is not a rank (0..{p})"
            )));
        }
        let s = self.scratch::<T>(n as u64)?;
        if self.rank() == root {
            for j in 0..p {
                self.put_elems(&s, j, 0, x.data()).await?;
            }
        }
        self.sync().await?;
        let data = self.read_elems(&s, 0, n).await?;
        self.sync().await?;
        Tensor::new(x.name(), x.shape(), data)
    }

    /// Every rank ends with every rank's `x`, stacked by rank: `[P·rows, cols]`.
    pub async fn allgather<T: Scalar>(&self, x: &Tensor<T>) -> Result<Tensor<T>> {
        let (p, me, n) = (self.world_size(), self.rank(), x.data().len());
        let s = self.scratch::<T>(p as u64 * n as u64)?;
        for j in 0..p {
            self.put_elems(&s, j, me as u64 * n as u64, x.data())
                .await?;
        }
        self.sync().await?;
        let data = self.read_elems(&s, 0, p as usize * n).await?;
        self.sync().await?;
        let [rows, cols] = x.shape();
        Tensor::new(x.name(), [rows * p as u64, cols], data)
    }

    /// `x` is `[P·b, cols]`; rank r ends with block r (`[b, cols]`) of the
    /// elementwise `op` of every rank's `x`.
    pub async fn reduce_scatter<T: Scalar>(
        &self,
        x: &Tensor<T>,
        op: ReduceOp,
    ) -> Result<Tensor<T>> {
        let (p, me) = (self.world_size() as usize, self.rank() as usize);
        let [rows, cols] = x.shape();
        let b = self.blocks("reduce_scatter", rows)?;
        let blk = (b * cols) as usize;
        let s = self.scratch::<T>((p * blk) as u64)?;
        for j in 0..p {
            let part = &x.data()[j * blk..(j + 1) * blk];
            self.put_elems(&s, j as u32, (me * blk) as u64, part)
                .await?;
        }
        self.sync().await?;
        let all = self.read_elems(&s, 0, p * blk).await?;
        self.sync().await?;
        let mut out = all[..blk].to_vec();
        for r in 1..p {
            for (i, v) in out.iter_mut().enumerate() {
                *v = op.apply(*v, all[r * blk + i]);
            }
        }
        Tensor::new(x.name(), [b, cols], out)
    }

    /// `x` is `[P·b, cols]`; block j goes to rank j, and rank r ends with
    /// the blocks every rank sent it, stacked by sender.
    pub async fn all_to_all<T: Scalar>(&self, x: &Tensor<T>) -> Result<Tensor<T>> {
        let (p, me) = (self.world_size() as usize, self.rank() as usize);
        let [rows, cols] = x.shape();
        let b = self.blocks("all_to_all", rows)?;
        let blk = (b * cols) as usize;
        let s = self.scratch::<T>((p * blk) as u64)?;
        for j in 0..p {
            let part = &x.data()[j * blk..(j + 1) * blk];
            self.put_elems(&s, j as u32, (me * blk) as u64, part)
                .await?;
        }
        self.sync().await?;
        let data = self.read_elems(&s, 0, p * blk).await?;
        self.sync().await?;
        Tensor::new(x.name(), [rows, cols], data)
    }

    /// `send[j]` (any length) goes to rank j; returns what each rank sent
    /// this one, by sender. The lengths are exchanged first.
    pub async fn all_to_all_v<T: Scalar>(&self, send: &[Vec<T>]) -> Result<Vec<Vec<T>>> {
        let (p, me) = (self.world_size() as usize, self.rank() as usize);
        if send.len() != p {
            return Err(Error::Usage(format!(
                "all_to_all_v: {} send buffers for {p} ranks",
                send.len()
            )));
        }
        // Round 1: every rank learns every length (a P × P matrix).
        let lens: Vec<i64> = send.iter().map(|v| v.len() as i64).collect();
        let counts = self.scratch::<i64>((p * p) as u64)?;
        for j in 0..p {
            self.put_elems(&counts, j as u32, (me * p) as u64, &lens)
                .await?;
        }
        self.sync().await?;
        let m = self.read_elems(&counts, 0, p * p).await?;
        self.sync().await?;
        // Rank r receives from sender s at the sum of earlier senders' lengths to r.
        let to = |s: usize, r: usize| m[s * p + r] as usize;
        let total = |r: usize| (0..p).map(|s| to(s, r)).sum::<usize>();
        let most = (0..p).map(total).max().unwrap_or(0);
        let s = self.scratch::<T>(most as u64)?;
        for (j, part) in send.iter().enumerate() {
            let at: usize = (0..me).map(|s| to(s, j)).sum();
            self.put_elems(&s, j as u32, at as u64, part).await?;
        }
        self.sync().await?;
        let all = self.read_elems(&s, 0, total(me)).await?;
        self.sync().await?;
        let mut out = Vec::with_capacity(p);
        let mut at = 0;
        for src in 0..p {
            out.push(all[at..at + to(src, me)].to_vec());
            at += to(src, me);
        }
        Ok(out)
    }

    fn blocks(&self, call: &str, rows: u64) -> Result<u64> {
        let p = self.world_size() as u64;
        if rows % p != 0 {
            return Err(Error::Usage(format!(
                "{call}: {rows} rows do not split into {p} equal blocks"
            )));
        }
        Ok(rows / p)
    }
}
