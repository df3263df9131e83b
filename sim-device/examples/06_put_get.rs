//! Step 06 — tensor-level put/get with a `[1, 1]` signal. `--mode put`:
//! each rank puts its `x` into the next rank's window and notifies it;
//! the receiver waits on its signal and reads `y[r] = x[(r-1) % N]`.
//! `--mode get`: each rank stages `x` in its own window and notifies the
//! previous rank, which waits and gets it: `y[r] = x[(r+1) % N]`.
//!
//! `cargo run -p pld-sim --example 06_put_get -- -p a2a3sim -d 0,1 --mode put`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Cmp, Device, NotifyOp, PutOpts, Result, Rma, Tensor};
use std::sync::Arc;

const SHAPE: [u64; 2] = [64, 256];

struct PutGet {
    put: bool,
}

impl Program for PutGet {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let data = dev.alloc::<f32>("data", "data", SHAPE)?;
        let signal = dev.alloc::<i32>("signal", "signal", [1, 1])?;
        let x = launch::input::<f32>("x", me, SHAPE);
        let mut y = Tensor::zeros("y", SHAPE);
        let (next, prev) = (dev.peer_next(1), dev.peer_prev(1));
        let from = if self.put {
            dev.put(&data, next, &x, PutOpts::default()).await?;
            dev.notify(&signal, next, [0, 0], 1, NotifyOp::Set).await?;
            dev.wait(&signal, [0, 0], 1, Cmp::Eq).await?;
            dev.get(&mut y, me, &data, PutOpts::default()).await?;
            prev
        } else {
            dev.put(&data, me, &x, PutOpts::default()).await?;
            dev.notify(&signal, prev, [0, 0], 1, NotifyOp::Set).await?;
            dev.wait(&signal, [0, 0], 1, Cmp::Eq).await?;
            dev.get(&mut y, next, &data, PutOpts::default()).await?;
            next
        };
        // Nobody leaves while a peer may still read its window: the
        // builtin barrier, on a `[nranks, 1]` signal of its own.
        let bar = dev.alloc::<i32>("barrier", "signal", [u64::from(n), 1])?;
        dev.barrier(&bar).await?;
        let want = launch::input::<f32>("x", from, SHAPE);
        Ok(Check::exact(y.data(), want.data()))
    }
}

fn main() {
    launch::main(|a| {
        Ok(PutGet {
            put: a.mode(&["put", "get"])? == "put",
        })
    });
}
