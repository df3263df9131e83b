//! Step 01 — hello rank: every rank computes `y[r] = x[r] + r` on its own
//! device. No communication yet: the rank id is ordinary INT32 arithmetic.
//!
//! `cargo run -p pld-sim --example 01_hello_rank -- -p a2a3sim -d 0,1`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Device, Result, Rma, Tensor};
use std::sync::Arc;

const SIZE: u64 = 1024;

struct HelloRank;

impl Program for HelloRank {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let me = dev.rank();
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        let mut y = Tensor::zeros("y", [1, SIZE]);
        let tile = dev.load(&x, [0, 0], [1, SIZE]).await?;
        let out = tile.add_scalar(f64::from(me))?;
        dev.store(&out, [0, 0], &mut y).await?;
        let want: Vec<f32> = x.data().iter().map(|v| v + me as f32).collect();
        Ok(Check::exact(y.data(), &want))
    }
}

fn main() {
    launch::main(|_| Ok(HelloRank));
}
