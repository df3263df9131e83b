//! Step 14 — reduce-scatter: each rank stages all P chunks of its input
//! (chunk c at row c of its `[P, SIZE]` window) and ends with chunk r
//! reduced across every rank. `--mode hand` (default) as the tutorial
//! writes it: a notify/wait barrier, then sum row `my_rank` of every
//! peer's window. `--mode builtin`: `Device::reduce_scatter(data, signal,
//! Sum)`, after which row `my_rank` of the window holds the result.
//!
//! `cargo run -p pld-sim --example 14_reduce_scatter -- -p a2a3sim -d 0,1,2 --mode builtin`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Cmp, Device, NotifyOp, ReduceOp, Result, Rma, Tensor, rank};
use std::sync::Arc;

const SIZE: u64 = 64;

struct ReduceScatter {
    builtin: bool,
}

impl Program for ReduceScatter {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let n = dev.world_size();
        let nr = u64::from(n);
        let data_buf = dev.alloc_window_buffer("data", nr * SIZE * 4)?;
        let signal_buf = dev.alloc_window_buffer("signal", nr * 4)?;
        let data = dev.window::<f32>(&data_buf, &[nr, SIZE])?;
        let signal = dev.window::<i32>(&signal_buf, &[nr, 1])?;
        let x = launch::input_nd::<f32>("x", n, [1, nr * SIZE]);
        let my_rank = rank(dev.get_comm_ctx(&data));
        let me = u64::from(my_rank);
        let xr = x.index(me)?;

        // Phase 1 — stage every chunk at its row.
        for c in 0..nr {
            let chunk = dev.load(&xr, [0, c * SIZE], [1, SIZE]).await?;
            dev.store(&chunk, [c, 0], &data).await?;
        }
        let acc = if self.builtin {
            dev.reduce_scatter(&data, &signal, ReduceOp::Sum).await?;
            dev.load(&data, [me, 0], [1, SIZE]).await?
        } else {
            // Phase 2 — barrier: notify every peer, wait on every peer's row.
            for peer in (0..n).filter(|p| *p != my_rank) {
                dev.notify(&signal, peer, [me, 0], 1, NotifyOp::AtomicAdd)
                    .await?;
            }
            for src in (0..n).filter(|s| *s != my_rank) {
                dev.wait(&signal, [u64::from(src), 0], 1, Cmp::Ge).await?;
            }
            // Phase 3 — reduce row my_rank across every peer.
            let mut acc = dev.load(&data, [me, 0], [1, SIZE]).await?;
            for peer in (0..n).filter(|p| *p != my_rank) {
                let recv = dev
                    .remote_load(&data, peer, [me, 0], [1, SIZE], None)
                    .await?;
                acc = acc.add(&recv)?;
            }
            acc
        };
        let mut y = Tensor::zeros("y", [1, SIZE]);
        dev.store(&acc, [0, 0], &mut y).await?;
        let sum = launch::sum_of_slices(&x)?;
        let want = &sum[(me * SIZE) as usize..((me + 1) * SIZE) as usize];
        Ok(Check::close(y.data(), want, 1e-5))
    }
}

fn main() {
    launch::main(|a| {
        Ok(ReduceScatter {
            builtin: a.builtin()?,
        })
    });
}
