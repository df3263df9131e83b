//! Step 03 — the window buffer: stage the local `x` into this rank's slice
//! of the window (a DistributedTensor), then read it back: `y == x`.
//!
//! `cargo run -p pld-sim --example 03_window_buffer -- -p a2a3sim -d 0,1`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Device, Result, Rma, Tensor};
use std::sync::Arc;

const SIZE: u64 = 1024;

struct WindowBuffer;

impl Program for WindowBuffer {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let data = dev.alloc::<f32>("data", "data", [1, SIZE])?;
        let me = dev.get_comm_ctx(&data).rank;
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        let mut y = Tensor::zeros("y", [1, SIZE]);
        let local = dev.load(&x, [0, 0], [1, SIZE]).await?;
        dev.store(&local, [0, 0], &data).await?;
        drop(local);
        let back = dev.load(&data, [0, 0], [1, SIZE]).await?;
        dev.store(&back, [0, 0], &mut y).await?;
        Ok(Check::exact(y.data(), x.data()))
    }
}

fn main() {
    launch::main(|_| Ok(WindowBuffer));
}
