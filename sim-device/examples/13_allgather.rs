//! Step 13 — all-gather: every rank ends with the rank-ordered
//! concatenation of every rank's slice. `--mode hand` (default) as the
//! tutorial writes it: stage this rank's slice in row `my_rank` of its
//! `[P, SIZE]` window, a notify/wait barrier, then `remote_load` row p of
//! every rank p. `--mode builtin`: `Device::allgather(x, data, signal)`
//! (push-based: each rank puts its slice into row r of every peer's
//! window, then a barrier), after which the window is the result.
//!
//! `cargo run -p pld-sim --example 13_allgather -- -p a2a3sim -d 0,1,2 --mode builtin`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Cmp, Device, Dtype, NotifyOp, Result, Rma, Tensor, rank};
use std::sync::Arc;

const SIZE: u64 = 64;

struct AllGather {
    builtin: bool,
}

impl Program for AllGather {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let n = dev.world_size();
        let nr = u64::from(n);
        let data_buf = dev.alloc_window_buffer_of("data", &[nr, SIZE], Dtype::Fp32)?;
        let signal_buf = dev.alloc_window_buffer_of("signal", &[nr, 1], Dtype::Int32)?;
        let data = dev.window::<f32>(&data_buf, &[nr, SIZE])?;
        let signal = dev.window::<i32>(&signal_buf, &[nr, 1])?;
        let x = launch::input_nd::<f32>("x", n, [1, SIZE]);
        let my_rank = rank(dev.get_comm_ctx(&data));
        let xr = x.index(u64::from(my_rank))?;
        let mut y = Tensor::zeros("y", [1, nr * SIZE]);
        if self.builtin {
            dev.allgather(&xr, &data, &signal).await?;
            for src in 0..nr {
                let chunk = dev.load(&data, [src, 0], [1, SIZE]).await?;
                dev.store(&chunk, [0, src * SIZE], &mut y).await?;
            }
        } else {
            // Phase 1 — stage this rank's slice into its own row.
            let local = dev.load(&xr, [0, 0], [1, SIZE]).await?;
            dev.store(&local, [u64::from(my_rank), 0], &data).await?;
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
            // Phase 3 — gather: pull every rank's row.
            for peer in 0..n {
                let p = u64::from(peer);
                let recv = dev
                    .remote_load(&data, peer, [p, 0], [1, SIZE], None)
                    .await?;
                dev.store(&recv, [0, p * SIZE], &mut y).await?;
            }
        }
        Ok(Check::close(y.data(), x.data(), 1e-5))
    }
}

fn main() {
    launch::main(|a| {
        Ok(AllGather {
            builtin: a.builtin()?,
        })
    });
}
