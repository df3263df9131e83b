//! Step 12 — broadcast from rank 0: by hand, the root remote_stores its
//! tile into every rank's window and a barrier publishes it;
//! `--use-builtin` calls the built-in broadcast.
//!
//! `cargo run -p pld-sim --example 12_broadcast -- -p a2a3sim -d 0,1 [--use-builtin]`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Device, Result, Rma, Tensor};
use std::sync::Arc;

const SIZE: u64 = 1024;
const ROOT: u32 = 0;

struct Broadcast {
    builtin: bool,
}

impl Program for Broadcast {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        let y = if self.builtin {
            dev.broadcast(&x, ROOT).await?
        } else {
            let data = dev.alloc::<f32>("data", "data", [1, SIZE])?;
            let signal = dev.alloc::<i32>("signal", "signal", [1, 8])?;
            if me == ROOT {
                let tile = dev.load(&x, [0, 0], [1, SIZE]).await?;
                for peer in 0..n {
                    dev.tile_remote_store(&tile, &data, peer, [0, 0], Atomic::None)
                        .await?;
                }
            }
            dev.barrier(&signal).await?;
            let mut y = Tensor::zeros("y", [1, SIZE]);
            let t = dev.load(&data, [0, 0], [1, SIZE]).await?;
            dev.store(&t, [0, 0], &mut y).await?;
            y
        };
        let want = launch::input::<f32>("x", ROOT, [1, SIZE]);
        Ok(Check::exact(y.data(), want.data()))
    }
}

fn main() {
    launch::main(|a| {
        Ok(Broadcast {
            builtin: a.use_builtin,
        })
    });
}
