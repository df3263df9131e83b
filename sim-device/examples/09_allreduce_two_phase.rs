//! Step 09 — all-reduce v2 (two-phase), as the tutorial writes it:
//! reduce-scatter then all-gather, with two notify/wait barriers on a
//! `[2, P]` signal (row 0 before the reduce-scatter reads, row 1 before
//! the all-gather reads; column = the arriving rank). Rank r reduces
//! chunk r of every peer's `data` into its `result`, then every rank reads
//! every rank's reduced chunk. About half mesh's traffic at P ≥ 4.
//! SIZE must split into P chunks (P = 2, 4, 8).
//!
//! `cargo run -p pld-sim --example 09_allreduce_two_phase -- -p a2a3sim -d 0,1,2,3`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Cmp, Device, DistributedTensor, Dtype, Error, NotifyOp, Result, Rma, Tensor};
use std::sync::Arc;

const SIZE: u64 = 64;

struct TwoPhase;

/// A notify/wait barrier on row `row` of the `[2, P]` signal.
async fn barrier_row<R: Rma>(
    dev: &Device<R>,
    signal: &DistributedTensor<i32>,
    row: u64,
) -> Result<()> {
    let (me, n) = (dev.rank(), dev.world_size());
    for peer in (0..n).filter(|p| *p != me) {
        dev.notify(signal, peer, [row, u64::from(me)], 1, NotifyOp::AtomicAdd)
            .await?;
    }
    for src in (0..n).filter(|s| *s != me) {
        dev.wait(signal, [row, u64::from(src)], 1, Cmp::Ge).await?;
    }
    Ok(())
}

impl Program for TwoPhase {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let nr = u64::from(n);
        let chunk = SIZE / nr;
        let data_buf = dev.alloc_window_buffer_of("data", &[1, SIZE], Dtype::Fp32)?;
        let result_buf = dev.alloc_window_buffer_of("result", &[1, SIZE], Dtype::Fp32)?;
        let signal_buf = dev.alloc_window_buffer_of("signal", &[2, nr], Dtype::Int32)?;
        let data = dev.window::<f32>(&data_buf, &[1, SIZE])?;
        let result = dev.window::<f32>(&result_buf, &[1, SIZE])?;
        let signal = dev.window::<i32>(&signal_buf, &[2, nr])?;
        let x = launch::input_nd::<f32>("x", n, [1, SIZE]);

        // Phase 1 — stage this rank's slice.
        let local = dev
            .load(&x.index(u64::from(me))?, [0, 0], [1, SIZE])
            .await?;
        dev.store(&local, [0, 0], &data).await?;
        barrier_row(&dev, &signal, 0).await?;

        // Phase 2 — reduce-scatter: rank r owns chunk r.
        let at = [0, u64::from(me) * chunk];
        let mut acc = dev.load(&data, at, [1, chunk]).await?;
        for peer in (0..n).filter(|p| *p != me) {
            let recv = dev.remote_load(&data, peer, at, [1, chunk], None).await?;
            acc = acc.add(&recv)?;
        }
        dev.store(&acc, at, &result).await?;
        barrier_row(&dev, &signal, 1).await?;

        // Phase 3 — all-gather: every rank's reduced chunk.
        let mut y = Tensor::zeros("y", [1, SIZE]);
        for c in 0..nr {
            let recv = dev
                .remote_load(&result, c as u32, [0, c * chunk], [1, chunk], None)
                .await?;
            dev.store(&recv, [0, c * chunk], &mut y).await?;
        }
        Ok(Check::close(y.data(), &launch::sum_of_slices(&x)?, 1e-5))
    }
}

fn main() {
    launch::main(|a| {
        let n = a.nranks();
        if n < 2 || SIZE % u64::from(n) != 0 {
            return Err(Error::Usage(format!(
                "SIZE={SIZE} must split into the rank count: run with P = 2, 4 or 8 ranks, not {n}"
            )));
        }
        Ok(TwoPhase)
    });
}
