//! Step 16 — putting it together: broadcast rank 0's x, scale it by
//! (r + 1) on every rank, all-reduce (ring), all-gather the result, and
//! exchange ragged blocks with all_to_all_v.
//!
//! `cargo run -p pld-sim --example 16_putting_it_together -- -p a2a3sim -d 0,1,2,3`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Algo, Device, ReduceOp, Result, Rma};
use std::sync::Arc;

const SIZE: u64 = 1024;

struct Together;

impl Program for Together {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        let b = dev.broadcast(&x, 0).await?;
        let scaled = b.mul_scalar(f64::from(me + 1));
        let sum = dev.allreduce(&scaled, ReduceOp::Sum, Algo::Ring).await?;
        let all = dev.allgather(&sum).await?;
        let k = (n * (n + 1) / 2) as f32;
        let one: Vec<f32> = launch::input::<f32>("x", 0, [1, SIZE])
            .data()
            .iter()
            .map(|v| v * k)
            .collect();
        let want: Vec<f32> = (0..n).flat_map(|_| one.clone()).collect();
        let mut check = Check::close(all.data(), &want, 1e-5);
        // Ragged exchange: rank r sends j + r + 1 copies of r·100 + j to rank j.
        let send: Vec<Vec<i32>> = (0..n)
            .map(|j| vec![(me * 100 + j) as i32; (j + me + 1) as usize])
            .collect();
        let got = dev.all_to_all_v(&send).await?;
        let want: Vec<i32> = (0..n)
            .flat_map(|s| vec![(s * 100 + me) as i32; (me + s + 1) as usize])
            .collect();
        let flat: Vec<i32> = got.into_iter().flatten().collect();
        check = check.and(Check::exact(&flat, &want));
        Ok(check)
    }
}

fn main() {
    launch::main(|_| Ok(Together));
}
