//! Step 09 — all-reduce in two phases, by hand: reduce-scatter (chunk j of
//! every rank's x goes to rank j, which adds them) then all-gather (each
//! rank pushes its reduced chunk to everyone). Each rank moves 2·SIZE
//! elements instead of the mesh's P·SIZE.
//!
//! `cargo run -p pld-sim --example 09_allreduce_two_phase -- -p a2a3sim -d 0,1,2,3`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Device, Error, Result, Rma};
use std::sync::Arc;

const SIZE: u64 = 1536;

struct TwoPhase;

impl Program for TwoPhase {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let p = u64::from(n);
        if SIZE % (8 * p) != 0 {
            return Err(Error::Usage(format!(
                "{SIZE} elements do not split into {n} aligned chunks"
            )));
        }
        let c = SIZE / p;
        let parts = dev.alloc::<f32>("parts", "data", [p, c])?;
        let result = dev.alloc::<f32>("result", "data", [1, SIZE])?;
        let signal = dev.alloc::<i32>("signal", "signal", [1, 8])?;
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        // Reduce-scatter: chunk j to rank j, row `me`.
        for j in 0..p {
            let chunk = dev.load(&x, [0, j * c], [1, c]).await?;
            dev.tile_remote_store(&chunk, &parts, j as u32, [u64::from(me), 0], Atomic::None)
                .await?;
        }
        dev.barrier(&signal).await?;
        let mut acc = dev.load(&parts, [0, 0], [1, c]).await?;
        for r in 1..p {
            acc = acc.add(&dev.load(&parts, [r, 0], [1, c]).await?)?;
        }
        // All-gather: the reduced chunk to every rank.
        for peer in 0..n {
            dev.tile_remote_store(&acc, &result, peer, [0, u64::from(me) * c], Atomic::None)
                .await?;
        }
        dev.barrier(&signal).await?;
        let y = dev.read_own(&result).await?;
        let mut want = vec![0f32; SIZE as usize];
        for r in 0..n {
            for (w, v) in want
                .iter_mut()
                .zip(launch::input::<f32>("x", r, [1, SIZE]).data())
            {
                *w += v;
            }
        }
        Ok(Check::close(y.data(), &want, 1e-5))
    }
}

fn main() {
    launch::main(|_| Ok(TwoPhase));
}
