//! Step 11 — the built-in all-reduce, `--mode mesh|ring`, with every
//! reduction: Sum, Max, Min and Prod.
//!
//! `cargo run -p pld-sim --example 11_allreduce_builtin -- -p a2a3sim -d 0,1 --mode ring`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Algo, Device, ReduceOp, Result, Rma};
use std::sync::Arc;

const SIZE: u64 = 1000;

struct Builtin {
    algo: Algo,
}

impl Program for Builtin {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        let mut check = Check::default();
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod] {
            let y = dev.allreduce(&x, op, self.algo).await?;
            let mut want = launch::input::<f32>("x", 0, [1, SIZE]).data().to_vec();
            for r in 1..n {
                for (w, v) in want
                    .iter_mut()
                    .zip(launch::input::<f32>("x", r, [1, SIZE]).data())
                {
                    *w = op.apply(*w, *v);
                }
            }
            check = check.and(Check::close(y.data(), &want, 1e-5));
        }
        Ok(check)
    }
}

fn main() {
    launch::main(|a| {
        let mode = a.mode(&["mesh", "ring"])?;
        let algo = Algo::parse(&mode)
            .ok_or_else(|| pld_sim::Error::Usage(format!("--mode {mode} is not mesh or ring")))?;
        Ok(Builtin { algo })
    });
}
