//! Step 07 — the put/get ring for any number of ranks (`-d 0,1,2,3`), with
//! a region larger than on-chip memory streamed in pipelined chunks: a
//! `[512, 512]` fp32 block (1 MiB) moves in `64 × 256` chunks, and only
//! its interior `[1..511, 1..511]` region is shifted, so the strided 2-D
//! path is exercised too.
//!
//! `cargo run -p pld-sim --example 07_put_get_any_p -- -p a2a3sim -d 0,1,2,3 --mode get`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Cmp, Device, NotifyOp, PutOpts, Result, Rma, Tensor};
use std::sync::Arc;

const SHAPE: [u64; 2] = [512, 512];
const INNER: [u64; 2] = [510, 510];

struct Ring {
    put: bool,
}

impl Program for Ring {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let me = dev.rank();
        let data = dev.alloc::<f32>("data", "data", SHAPE)?;
        let signal = dev.alloc::<i32>("signal", "signal", [1, 1])?;
        let x = launch::input::<f32>("x", me, SHAPE);
        let mut y = Tensor::zeros("y", SHAPE);
        let (next, prev) = (dev.peer_next(1), dev.peer_prev(1));
        let region = PutOpts::region([1, 1], [1, 1], INNER)
            .chunks(64, 256)
            .pipelined();
        let from = if self.put {
            dev.put(&data, next, &x, region).await?;
            dev.notify(&signal, next, [0, 0], 1, NotifyOp::Set).await?;
            dev.wait(&signal, [0, 0], 1, Cmp::Eq).await?;
            dev.get(&mut y, me, &data, region).await?;
            prev
        } else {
            dev.put(&data, me, &x, region).await?;
            dev.notify(&signal, prev, [0, 0], 1, NotifyOp::Set).await?;
            dev.wait(&signal, [0, 0], 1, Cmp::Eq).await?;
            dev.get(&mut y, next, &data, region).await?;
            next
        };
        // Nobody leaves while a peer may still read its window.
        let bar = dev.alloc::<i32>("barrier", "signal", [u64::from(dev.world_size()), 1])?;
        dev.barrier(&bar).await?;
        // The interior comes from `from`; the border of y stays zero.
        let src = launch::input::<f32>("x", from, SHAPE);
        let mut want = Tensor::zeros("want", SHAPE);
        for r in 1..=INNER[0] {
            for c in 1..=INNER[1] {
                want.data_mut()[(r * SHAPE[1] + c) as usize] = src.at(r, c);
            }
        }
        Ok(Check::exact(y.data(), want.data()))
    }
}

fn main() {
    launch::main(|a| {
        Ok(Ring {
            put: a.mode(&["put", "get"])? == "put",
        })
    });
}
