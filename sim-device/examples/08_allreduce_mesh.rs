//! Step 08 — all-reduce v1 (mesh), as the tutorial writes it: stage this
//! rank's slice into its window, a notify/wait barrier (each rank owns row
//! `my_rank` of every peer's `[P, 1]` signal), then pull every peer's
//! slice with `remote_load` and add them on chip. O(P) reads per rank.
//!
//! `cargo run -p pld-sim --example 08_allreduce_mesh -- -p a2a3sim -d 0,1,2,3`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Cmp, Device, Dtype, NotifyOp, Result, Rma, Tensor, rank};
use std::sync::Arc;

const SIZE: u64 = 64;

struct Mesh;

impl Program for Mesh {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let n = dev.world_size();
        let nr = u64::from(n);
        let data_buf = dev.alloc_window_buffer_of("data", &[1, SIZE], Dtype::Fp32)?;
        let signal_buf = dev.alloc_window_buffer_of("signal", &[nr, 1], Dtype::Int32)?;
        let data = dev.window::<f32>(&data_buf, &[1, SIZE])?;
        let signal = dev.window::<i32>(&signal_buf, &[nr, 1])?;
        let x = launch::input_nd::<f32>("x", n, [1, SIZE]);
        let my_rank = rank(dev.get_comm_ctx(&data));

        // Phase 1 — stage this rank's slice into its window slot.
        let local = dev
            .load(&x.index(u64::from(my_rank))?, [0, 0], [1, SIZE])
            .await?;
        dev.store(&local, [0, 0], &data).await?;

        // Phase 2 — barrier: notify every peer, wait on every peer's row.
        for peer in (0..n).filter(|p| *p != my_rank) {
            dev.notify(
                &signal,
                peer,
                [u64::from(my_rank), 0],
                1,
                NotifyOp::AtomicAdd,
            )
            .await?;
        }
        for src in (0..n).filter(|s| *s != my_rank) {
            dev.wait(&signal, [u64::from(src), 0], 1, Cmp::Ge).await?;
        }

        // Phase 3 — accumulate: our own slice plus every peer's.
        let mut acc = dev.load(&data, [0, 0], [1, SIZE]).await?;
        for peer in (0..n).filter(|p| *p != my_rank) {
            let recv = dev
                .remote_load(&data, peer, [0, 0], [1, SIZE], None)
                .await?;
            acc = acc.add(&recv)?;
        }

        // Phase 4 — stage-out.
        let mut y = Tensor::zeros("y", [1, SIZE]);
        dev.store(&acc, [0, 0], &mut y).await?;
        Ok(Check::close(y.data(), &launch::sum_of_slices(&x)?, 1e-5))
    }
}

fn main() {
    launch::main(|_| Ok(Mesh));
}
