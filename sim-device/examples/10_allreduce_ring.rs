//! Step 10 — ring all-reduce, by hand, ordered by signals instead of
//! barriers: 2(P − 1) steps; in each, a rank remote_stores one chunk into
//! the next rank's slot for that step and sets the next rank's signal cell
//! for the step; it then waits for its own cell and adds (reduce-scatter)
//! or copies (all-gather) the chunk it received.
//!
//! `cargo run -p pld-sim --example 10_allreduce_ring -- -p a2a3sim -d 0,1,2,3`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Cmp, Device, Error, NotifyOp, Result, Rma};
use std::sync::Arc;

const SIZE: u64 = 1536;

struct RingAllReduce;

impl Program for RingAllReduce {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let p = u64::from(n);
        if SIZE % (8 * p) != 0 {
            return Err(Error::Usage(format!(
                "{SIZE} elements do not split into {n} aligned chunks"
            )));
        }
        let c = SIZE / p;
        let steps = 2 * (p - 1);
        let slots = dev.alloc::<f32>("slots", "data", [steps.max(1), c])?;
        let signal = dev.alloc::<i32>("signal", "signal", [1, steps.max(1)])?;
        let barrier = dev.alloc::<i32>("barrier", "signal", [1, 8])?;
        let mut acc = launch::input::<f32>("x", me, [1, SIZE]);
        let next = (me + 1) % n;
        let m = u64::from(me);
        for s in 0..steps {
            // Reduce-scatter sends chunk (me − s), all-gather (me + 1 − s).
            let (send, recv) = if s < p - 1 {
                ((m + p - s) % p, (m + 2 * p - s - 1) % p)
            } else {
                let k = s - (p - 1);
                ((m + 1 + p - k) % p, (m + p - k) % p)
            };
            let tile = dev.load(&acc, [0, send * c], [1, c]).await?;
            dev.tile_remote_store(&tile, &slots, next, [s, 0], Atomic::None)
                .await?;
            dev.notify(&signal, next, [0, s], 1, NotifyOp::Set).await?;
            dev.wait(&signal, [0, s], 1, Cmp::Eq).await?;
            let got = dev.load(&slots, [s, 0], [1, c]).await?;
            let mine = dev.load(&acc, [0, recv * c], [1, c]).await?;
            let out = if s < p - 1 { mine.add(&got)? } else { got };
            dev.store(&out, [0, recv * c], &mut acc).await?;
        }
        dev.barrier(&barrier).await?;
        let mut want = vec![0f32; SIZE as usize];
        for r in 0..n {
            for (w, v) in want
                .iter_mut()
                .zip(launch::input::<f32>("x", r, [1, SIZE]).data())
            {
                *w += v;
            }
        }
        Ok(Check::close(acc.data(), &want, 1e-5))
    }
}

fn main() {
    launch::main(|_| Ok(RingAllReduce));
}
