//! Step 13 — all-gather: every rank ends with every rank's x, stacked by
//! rank. By hand each rank remote_stores its tile into row r of every
//! rank's `[P, SIZE]` view; `--use-builtin` calls the built-in.
//!
//! `cargo run -p pld-sim --example 13_allgather -- -p a2a3sim -d 0,1 [--use-builtin]`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Device, Result, Rma};
use std::sync::Arc;

const SIZE: u64 = 1024;

struct AllGather {
    builtin: bool,
}

impl Program for AllGather {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        let y = if self.builtin {
            dev.allgather(&x).await?
        } else {
            let rows = dev.alloc::<f32>("rows", "data", [u64::from(n), SIZE])?;
            let signal = dev.alloc::<i32>("signal", "signal", [1, 8])?;
            let tile = dev.load(&x, [0, 0], [1, SIZE]).await?;
            for peer in 0..n {
                dev.tile_remote_store(&tile, &rows, peer, [u64::from(me), 0], Atomic::None)
                    .await?;
            }
            dev.barrier(&signal).await?;
            dev.read_own(&rows).await?
        };
        let want: Vec<f32> = (0..n)
            .flat_map(|r| launch::input::<f32>("x", r, [1, SIZE]).data().to_vec())
            .collect();
        Ok(Check::exact(y.data(), &want))
    }
}

fn main() {
    launch::main(|a| {
        Ok(AllGather {
            builtin: a.use_builtin,
        })
    });
}
