//! Step 14 — reduce-scatter: x is `[P, COLS]`; rank r ends with row r of
//! the sum over ranks. By hand, row j of x goes to rank j's slot r, then
//! each rank adds its slots; `--use-builtin` calls the built-in.
//!
//! `cargo run -p pld-sim --example 14_reduce_scatter -- -p a2a3sim -d 0,1 [--use-builtin]`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Device, ReduceOp, Result, Rma, Tensor};
use std::sync::Arc;

const COLS: u64 = 512;

struct ReduceScatter {
    builtin: bool,
}

impl Program for ReduceScatter {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let p = u64::from(n);
        let x = launch::input::<f32>("x", me, [p, COLS]);
        let y = if self.builtin {
            dev.reduce_scatter(&x, ReduceOp::Sum).await?
        } else {
            let slots = dev.alloc::<f32>("slots", "data", [p, COLS])?;
            let signal = dev.alloc::<i32>("signal", "signal", [1, 8])?;
            for j in 0..p {
                let row = dev.load(&x, [j, 0], [1, COLS]).await?;
                dev.tile_remote_store(&row, &slots, j as u32, [u64::from(me), 0], Atomic::None)
                    .await?;
            }
            dev.barrier(&signal).await?;
            let mut acc = dev.load(&slots, [0, 0], [1, COLS]).await?;
            for r in 1..p {
                acc = acc.add(&dev.load(&slots, [r, 0], [1, COLS]).await?)?;
            }
            let mut y = Tensor::zeros("y", [1, COLS]);
            dev.store(&acc, [0, 0], &mut y).await?;
            y
        };
        let mut want = vec![0f32; COLS as usize];
        for r in 0..n {
            let xr = launch::input::<f32>("x", r, [p, COLS]);
            for (c, w) in want.iter_mut().enumerate() {
                *w += xr.at(u64::from(me), c as u64);
            }
        }
        Ok(Check::close(y.data(), &want, 1e-5))
    }
}

fn main() {
    launch::main(|a| {
        Ok(ReduceScatter {
            builtin: a.use_builtin,
        })
    });
}
