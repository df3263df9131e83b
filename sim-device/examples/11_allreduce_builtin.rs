//! Step 11 — the reveal: `Device::allreduce(target, signal, op, mode)` in
//! one call, mesh or ring (`--mode mesh|ring`). Stage-in and stage-out
//! stay the kernel's; the builtin owns the barrier, the reduction and the
//! store-back into the window. The signal is `[P, 1]` for mesh and
//! `[2(P−1), P]` for ring, and it is reused across the four reductions
//! (`Sum`, `Max`, `Min`, `Prod`): the credits clear themselves.
//!
//! `cargo run -p pld-sim --example 11_allreduce_builtin -- -p a2a3sim -d 0,1,2,3 --mode ring`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Algo, Device, Dtype, ReduceOp, Result, Rma, Tensor};
use std::sync::Arc;

const SIZE: u64 = 64;

struct Builtin {
    algo: Algo,
}

impl Program for Builtin {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let nr = u64::from(n);
        let sig = match self.algo {
            Algo::Mesh => [nr, 1],
            Algo::Ring => [2 * (nr - 1).max(1), nr],
        };
        let data_buf = dev.alloc_window_buffer_of("data", &[1, SIZE], Dtype::Fp32)?;
        let signal_buf = dev.alloc_window_buffer_of("signal", &sig, Dtype::Int32)?;
        let data = dev.window::<f32>(&data_buf, &[1, SIZE])?;
        let signal = dev.window::<i32>(&signal_buf, &sig)?;
        let x = launch::input_nd::<f32>("x", n, [1, SIZE]);
        let mut check = Check::default();
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod] {
            // Stage-in, one builtin call, stage-out.
            let local = dev
                .load(&x.index(u64::from(me))?, [0, 0], [1, SIZE])
                .await?;
            dev.store(&local, [0, 0], &data).await?;
            dev.allreduce(&data, &signal, op, self.algo).await?;
            let recv = dev.load(&data, [0, 0], [1, SIZE]).await?;
            let mut y = Tensor::zeros("y", [1, SIZE]);
            dev.store(&recv, [0, 0], &mut y).await?;
            let mut want = x.index(0)?.data().to_vec();
            for r in 1..nr {
                for (w, v) in want.iter_mut().zip(x.index(r)?.data()) {
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
