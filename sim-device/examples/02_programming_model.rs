//! Step 02 — the programming model: the same kernel runs on every rank and
//! branches on its rank: `y[r] = x[r] * (r + 1)`.
//!
//! `cargo run -p pld-sim --example 02_programming_model -- -p a2a3sim -d 0,1`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Device, Result, Rma, Tensor};
use std::sync::Arc;

const SIZE: u64 = 1024;

struct ProgrammingModel;

impl Program for ProgrammingModel {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        assert!(me < n);
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        let mut y = Tensor::zeros("y", [1, SIZE]);
        let tile = dev.load(&x, [0, 0], [1, SIZE]).await?;
        // Integer arithmetic on the rank; a cast only for the data.
        let scale = (me + 1) as i32;
        let out = tile.mul_scalar(f64::from(scale))?;
        dev.store(&out, [0, 0], &mut y).await?;
        let want: Vec<f32> = x.data().iter().map(|v| v * scale as f32).collect();
        Ok(Check::exact(y.data(), &want))
    }
}

fn main() {
    launch::main(|_| Ok(ProgrammingModel));
}
