//! Step 15 — all-to-all: x is `[P, COLS]`; row j goes to rank j, and rank
//! r ends with row r of every rank, stacked by sender. By hand with one
//! remote_store per peer and a barrier; `--use-builtin` calls the built-in.
//!
//! `cargo run -p pld-sim --example 15_all_to_all -- -p a2a3sim -d 0,1 [--use-builtin]`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Device, Result, Rma};
use std::sync::Arc;

const COLS: u64 = 512;

struct AllToAll {
    builtin: bool,
}

impl Program for AllToAll {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let p = u64::from(n);
        let x = launch::input::<f32>("x", me, [p, COLS]);
        let y = if self.builtin {
            dev.all_to_all(&x).await?
        } else {
            let slots = dev.alloc::<f32>("slots", "data", [p, COLS])?;
            let signal = dev.alloc::<i32>("signal", "signal", [1, 8])?;
            for j in 0..p {
                let row = dev.load(&x, [j, 0], [1, COLS]).await?;
                dev.tile_remote_store(&row, &slots, j as u32, [u64::from(me), 0], Atomic::None)
                    .await?;
            }
            dev.barrier(&signal).await?;
            dev.read_own(&slots).await?
        };
        let want: Vec<f32> = (0..n)
            .flat_map(|r| {
                let xr = launch::input::<f32>("x", r, [p, COLS]);
                (0..COLS)
                    .map(move |c| xr.at(u64::from(me), c))
                    .collect::<Vec<_>>()
            })
            .collect();
        Ok(Check::exact(y.data(), &want))
    }
}

fn main() {
    launch::main(|a| {
        Ok(AllToAll {
            builtin: a.use_builtin,
        })
    });
}
