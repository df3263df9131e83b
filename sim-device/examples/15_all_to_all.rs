//! Step 15 — all-to-all: block j of rank r's `[P, COLS]` input goes to
//! rank j, and rank r ends with block r of every rank's input, stacked by
//! sender. `--mode hand` (default): remote_store each row into row
//! `my_rank` of the peer's window, then a notify/wait barrier.
//! `--mode builtin`: `Device::all_to_all(x, data, signal)`.
//!
//! `cargo run -p pld-sim --example 15_all_to_all -- -p a2a3sim -d 0,1,2 --mode builtin`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Cmp, Device, Dtype, NotifyOp, Result, Rma};
use std::sync::Arc;

const COLS: u64 = 64;

struct AllToAll {
    builtin: bool,
}

impl Program for AllToAll {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let p = u64::from(n);
        let data_buf = dev.alloc_window_buffer_of("data", &[p, COLS], Dtype::Fp32)?;
        let signal_buf = dev.alloc_window_buffer_of("signal", &[p, 1], Dtype::Int32)?;
        let data = dev.window::<f32>(&data_buf, &[p, COLS])?;
        let signal = dev.window::<i32>(&signal_buf, &[p, 1])?;
        let x = launch::input::<f32>("x", me, [p, COLS]);
        if self.builtin {
            dev.all_to_all(&x, &data, &signal).await?;
        } else {
            for j in 0..n {
                let row = dev.load(&x, [u64::from(j), 0], [1, COLS]).await?;
                dev.tile_remote_store(&row, &data, j, [u64::from(me), 0], Atomic::None)
                    .await?;
            }
            for peer in (0..n).filter(|q| *q != me) {
                dev.notify(&signal, peer, [u64::from(me), 0], 1, NotifyOp::AtomicAdd)
                    .await?;
            }
            for src in (0..n).filter(|s| *s != me) {
                dev.wait(&signal, [u64::from(src), 0], 1, Cmp::Ge).await?;
            }
        }
        let y = dev.read_own(&data).await?;
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
            builtin: a.builtin()?,
        })
    });
}
