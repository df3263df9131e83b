//! Step 12 — one-to-all: root stages its slice, every rank reads it.
//! `--mode hand` (default) as the tutorial writes it: root stages, a
//! notify/wait barrier on the `[P, 1]` signal, every rank `remote_load`s
//! root's slice. `--mode builtin`: root stages, then
//! `Device::broadcast(data, signal, root)`. Either way `y[r] = x[0]`, and
//! no other rank's input may appear in the output.
//!
//! `cargo run -p pld-sim --example 12_broadcast -- -p a2a3sim -d 0,1 --mode builtin`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Cmp, Device, NotifyOp, Result, Rma, Tensor, rank};
use std::sync::Arc;

const SIZE: u64 = 64;
const ROOT: u32 = 0;

struct Broadcast {
    builtin: bool,
}

impl Program for Broadcast {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let n = dev.world_size();
        let nr = u64::from(n);
        let data_buf = dev.alloc_window_buffer("data", SIZE * 4)?;
        let signal_buf = dev.alloc_window_buffer("signal", nr * 4)?;
        let data = dev.window::<f32>(&data_buf, &[1, SIZE])?;
        let signal = dev.window::<i32>(&signal_buf, &[nr, 1])?;
        let x = launch::input_nd::<f32>("x", n, [1, SIZE]);
        let my_rank = rank(dev.get_comm_ctx(&data));

        // Phase 1 — stage-in: root only.
        if my_rank == ROOT {
            let local = dev
                .load(&x.index(u64::from(ROOT))?, [0, 0], [1, SIZE])
                .await?;
            dev.store(&local, [0, 0], &data).await?;
        }
        let mut y = Tensor::zeros("y", [1, SIZE]);
        if self.builtin {
            // Phases 2–3 in one call; root's slice is now in our window.
            dev.broadcast(&data, &signal, ROOT).await?;
            let acc = dev.load(&data, [0, 0], [1, SIZE]).await?;
            dev.store(&acc, [0, 0], &mut y).await?;
        } else {
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
            // Phase 3 — pull root's slice.
            let recv = dev
                .remote_load(&data, ROOT, [0, 0], [1, SIZE], None)
                .await?;
            dev.store(&recv, [0, 0], &mut y).await?;
        }
        Ok(Check::close(
            y.data(),
            x.index(u64::from(ROOT))?.data(),
            1e-5,
        ))
    }
}

fn main() {
    launch::main(|a| {
        Ok(Broadcast {
            builtin: a.builtin()?,
        })
    });
}
