//! pld's figures, measured the way the OSU micro-benchmarks (and
//! `mpi_rma_bench`) measure them: latency is one op plus its completion;
//! bandwidth is a window of ops, then one `quiet`.

use crate::report::Figure;
use bytes::BytesMut;
use pld_server::{Dtype, Rank, WindowId};
use std::time::Instant;

/// Ops in one bandwidth window (OSU's window size).
pub const WINDOW: usize = 64;
/// A window never moves more than this, so that 64 MiB ops stay quick.
const MAX_WINDOW_BYTES: u64 = 256 << 20;

/// Runs against `peer` with rank 0's window `data`.
pub struct Bench<'a> {
    pub rank: &'a Rank,
    pub peer: u32,
    pub data: WindowId,
    pub quick: bool,
    /// msg_rate's puts per `quiet`.
    pub window: usize,
}

/// Iterations per size: as `mpi_rma_bench` (10 000 / 1 000 / 100), fewer
/// above 4 MiB.
fn iters_for(size: u64, quick: bool) -> usize {
    let n = match size {
        s if s > 4 << 20 => 20,
        s if s >= 1 << 20 => 100,
        s if s >= 64 << 10 => 1000,
        _ => 10_000,
    };
    if quick { (n / 10).max(5) } else { n }
}

fn window_for(size: u64) -> usize {
    (MAX_WINDOW_BYTES / size.max(1)).clamp(1, WINDOW as u64) as usize
}

type R<T> = anyhow::Result<T>;

/// `$b.window` ops, then `quiet`, over and over; ops per second as
/// `$name` (`$nbi`: an op without a handle) and `${name}_nb` (`$nb`: with
/// one, dropped at once), `_w<N>` after them with `--window N`. A macro,
/// not a function taking a closure: a future per op around the op's own
/// would be measured with it.
macro_rules! window_rate {
    ($b:expr, $name:expr, $nbi:expr, $nb:expr) => {{
        let iters = if $b.quick { 100 } else { 1000 };
        let mut figs = Vec::new();
        for handles in [false, true] {
            let mut t0 = Instant::now();
            for i in 0..=iters {
                if i == 1 {
                    t0 = Instant::now();
                }
                for _ in 0..$b.window {
                    match handles {
                        false => $nbi.await?,
                        true => drop($nb.await?),
                    }
                }
                $b.rank.quiet().await?;
            }
            let n = ($b.window * iters) as f64;
            let nb = if handles { "_nb" } else { "" };
            let name = match $b.window {
                WINDOW => format!("{}{nb}", $name),
                w => format!("{}{nb}_w{w}", $name),
            };
            figs.push(Figure::rate(&name, 8, n / t0.elapsed().as_secs_f64()));
        }
        Ok(figs)
    }};
}

impl Bench<'_> {
    /// Mean time of `op` over the size's iterations, after a 10 % warm-up, in µs.
    async fn mean_us<F, Fut>(&self, size: u64, mut op: F) -> R<f64>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = pld_server::Result<()>>,
    {
        let iters = iters_for(size, self.quick);
        for _ in 0..iters / 10 {
            op().await?;
        }
        let t0 = Instant::now();
        for _ in 0..iters {
            op().await?;
        }
        Ok(t0.elapsed().as_secs_f64() * 1e6 / iters as f64)
    }

    pub async fn put_lat(&self, size: u64) -> R<Figure> {
        let buf = vec![7u8; size as usize];
        let us = self
            .mean_us(size, || self.rank.put(self.peer, self.data, 0, &buf))
            .await?;
        Ok(Figure::lat("put_lat", size, us))
    }

    /// Gets into one reused buffer, as MPI_Get into `buf`.
    pub async fn get_lat(&self, size: u64) -> R<Figure> {
        let mut buf = BytesMut::zeroed(size as usize);
        let iters = iters_for(size, self.quick);
        let mut t0 = Instant::now();
        for i in 0..iters + iters / 10 {
            if i == iters / 10 {
                t0 = Instant::now();
            }
            buf = self
                .rank
                .get_nb_into(self.peer, self.data, 0, buf)
                .await?
                .wait()
                .await?;
        }
        let us = t0.elapsed().as_secs_f64() * 1e6 / iters as f64;
        Ok(Figure::lat("get_lat", size, us))
    }

    /// Atomic add of int32 elements (MPI_Accumulate of MPI_INT, MPI_SUM).
    pub async fn acc_lat(&self, size: u64) -> R<Figure> {
        let buf = vec![1u8; (size / 4 * 4).max(4) as usize];
        let us = self
            .mean_us(size, || {
                self.rank
                    .atomic_add(self.peer, self.data, 0, Dtype::Int32, &buf)
            })
            .await?;
        Ok(Figure::lat("acc_lat", size, us))
    }

    /// fetch_add of one int64 (MPI_Fetch_and_op of MPI_LONG).
    pub async fn fetch_add_lat(&self) -> R<Figure> {
        let us = self
            .mean_us(8, || async {
                self.rank
                    .fetch_add(self.peer, self.data, 0, Dtype::Int64, 1)
                    .await
                    .map(drop)
            })
            .await?;
        Ok(Figure::lat("fetch_add_lat", 8, us))
    }

    /// compare_swap of one int64 (MPI_Compare_and_swap of MPI_LONG).
    pub async fn cas_lat(&self) -> R<Figure> {
        let mut i = 0i64;
        let us = self
            .mean_us(8, || {
                i += 1;
                let (expected, desired) = (i - 1, i);
                async move {
                    self.rank
                        .compare_swap(self.peer, self.data, 0, Dtype::Int64, expected, desired)
                        .await
                        .map(drop)
                }
            })
            .await?;
        Ok(Figure::lat("cas_lat", 8, us))
    }

    fn bw_iters(&self, size: u64) -> usize {
        (iters_for(size, self.quick) / 10).max(if self.quick { 3 } else { 10 })
    }

    /// A window of puts, then quiet; MB/s. The puts are `put_nbi`s, as
    /// the MPI peer's are `MPI_Put`s: no handle per op.
    pub async fn put_bw(&self, size: u64) -> R<Figure> {
        let buf = vec![7u8; size as usize];
        let (w, iters) = (window_for(size), self.bw_iters(size));
        let mut t0 = Instant::now();
        for i in 0..=iters {
            if i == 1 {
                t0 = Instant::now();
            }
            for _ in 0..w {
                self.rank.put_nbi(self.peer, self.data, 0, &buf).await?;
            }
            self.rank.quiet().await?;
        }
        let mb = (size * w as u64 * iters as u64) as f64 / 1e6;
        Ok(Figure::bw("put_bw", size, mb / t0.elapsed().as_secs_f64()))
    }

    /// A window of gets into the same bytes of this rank's own window,
    /// then quiet, as the MPI peer's `MPI_Get`s into one buffer then a
    /// flush; MB/s. The gets are `get_nbi`s: no handle per op.
    pub async fn get_bw(&self, size: u64) -> R<Figure> {
        let (w, iters) = (window_for(size), self.bw_iters(size));
        let mut t0 = Instant::now();
        for i in 0..=iters {
            if i == 1 {
                t0 = Instant::now();
            }
            for _ in 0..w {
                let (data, peer) = (self.data, self.peer);
                self.rank.get_nbi(peer, data, 0, size, data, 0).await?;
            }
            self.rank.quiet().await?;
        }
        let mb = (size * w as u64 * iters as u64) as f64 / 1e6;
        Ok(Figure::bw("get_bw", size, mb / t0.elapsed().as_secs_f64()))
    }

    /// A window of gets, each with its handle, into buffers of their own
    /// (reused from window to window), then all of them awaited; MB/s.
    /// Its destinations span `window` times the size (64 MiB at 1 MiB),
    /// not one buffer's bytes as `get_bw`'s do.
    pub async fn get_bw_nb(&self, size: u64) -> R<Figure> {
        let (w, iters) = (window_for(size), self.bw_iters(size));
        let mut bufs: Vec<BytesMut> = (0..w).map(|_| BytesMut::zeroed(size as usize)).collect();
        let mut t0 = Instant::now();
        for i in 0..=iters {
            if i == 1 {
                t0 = Instant::now();
            }
            let mut handles = Vec::with_capacity(w);
            for b in bufs.drain(..) {
                handles.push(self.rank.get_nb_into(self.peer, self.data, 0, b).await?);
            }
            for h in handles {
                bufs.push(h.wait().await?);
            }
        }
        let mb = (size * w as u64 * iters as u64) as f64 / 1e6;
        Ok(Figure::bw(
            "get_bw_nb",
            size,
            mb / t0.elapsed().as_secs_f64(),
        ))
    }

    /// Puts and gets at once (data flowing both ways on the link); MB/s of
    /// both directions together.
    pub async fn bibw(&self, size: u64) -> R<Figure> {
        let buf = vec![7u8; size as usize];
        let (w, iters) = (window_for(size), self.bw_iters(size));
        let mut t0 = Instant::now();
        for i in 0..=iters {
            if i == 1 {
                t0 = Instant::now();
            }
            let mut gets = Vec::with_capacity(w);
            for _ in 0..w {
                drop(self.rank.put_nb(self.peer, self.data, 0, &buf).await?);
                gets.push(self.rank.get_nb(self.peer, self.data, size, size).await?);
            }
            self.rank.quiet().await?;
            for g in gets {
                g.wait().await?;
            }
        }
        let mb = (2 * size * w as u64 * iters as u64) as f64 / 1e6;
        Ok(Figure::bw("bibw", size, mb / t0.elapsed().as_secs_f64()))
    }

    /// 8-byte puts, a window at a time; messages per second: `msg_rate`
    /// with `put_nbi` (no handle per op, like `MPI_Put`), `msg_rate_nb`
    /// with `put_nb` and each handle dropped at once.
    pub async fn msg_rate(&self) -> R<Vec<Figure>> {
        let (rank, peer, data, buf) = (self.rank, self.peer, self.data, [7u8; 8]);
        window_rate!(
            self,
            "msg_rate",
            rank.put_nbi(peer, data, 0, &buf),
            rank.put_nb(peer, data, 0, &buf)
        )
    }

    /// msg_rate's window, of int64 atomic adds to one counter: `acc_rate`
    /// with `atomic_add_nbi`, `acc_rate_nb` with `atomic_add_nb` and the
    /// handle dropped.
    pub async fn acc_rate(&self) -> R<Vec<Figure>> {
        let (rank, peer, data, one) = (self.rank, self.peer, self.data, 1i64.to_le_bytes());
        let int64 = Dtype::Int64;
        window_rate!(
            self,
            "acc_rate",
            rank.atomic_add_nbi(peer, data, 0, int64, &one),
            rank.atomic_add_nb(peer, data, 0, int64, &one)
        )
    }
}
