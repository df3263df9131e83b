//! Step 04 — a hand-rolled barrier: every rank AtomicAdds 1 into every
//! rank's signal cell and waits until its own reaches P (Ge). Each rank
//! first writes a 1 into slot r of every other rank, so after the barrier
//! rank r's tally reads `y[r][i] = (i != r)`. `--use-builtin` uses the
//! dissemination barrier instead.
//!
//! `cargo run -p pld-sim --example 04_barrier -- -p a2a3sim -d 0,1 [--use-builtin]`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Cmp, Device, DistributedTensor, NotifyOp, Result, Rma, Tensor};
use std::sync::Arc;

struct Barrier {
    builtin: bool,
}

/// The barrier of step 04: arrive at every rank, wait for all arrivals.
/// Reusable: the `epoch`-th barrier waits for `epoch × P`.
async fn hand_rolled_barrier<R: Rma>(
    dev: &Device<R>,
    signal: &DistributedTensor<i32>,
    epoch: i32,
) -> Result<()> {
    let n = dev.world_size();
    for peer in 0..n {
        dev.notify(signal, peer, [0, 0], 1, NotifyOp::AtomicAdd)
            .await?;
    }
    dev.wait(signal, [0, 0], epoch * n as i32, Cmp::Ge).await?;
    Ok(())
}

impl Program for Barrier {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let width = u64::from(n).div_ceil(8) * 8;
        let tally = dev.alloc::<i32>("tally", "data", [1, width])?;
        let signal = dev.alloc::<i32>("signal", "signal", [1, 8])?;
        let one = Tensor::new("one", [1, 1], vec![1i32])?;
        for peer in (0..n).filter(|p| *p != me) {
            dev.tensor_remote_store(&one, &tally, peer, [0, u64::from(me)], Default::default())
                .await?;
        }
        if self.builtin {
            dev.barrier(&signal).await?;
        } else {
            hand_rolled_barrier(&dev, &signal, 1).await?;
        }
        let y = dev.read_own(&tally).await?;
        let want: Vec<i32> = (0..width as u32)
            .map(|i| i32::from(i != me && i < n))
            .collect();
        // A second round shows the barrier is reusable.
        if !self.builtin {
            hand_rolled_barrier(&dev, &signal, 2).await?;
        }
        Ok(Check::exact(y.data(), &want))
    }
}

fn main() {
    launch::main(|a| {
        Ok(Barrier {
            builtin: a.use_builtin,
        })
    });
}
