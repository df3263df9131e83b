//! The all-to-all *combine*: every rank adds its contribution for rank j
//! into rank j's accumulator with `remote_store(..., atomic = Add)`, all at
//! once and in no particular order; atomic adds lose nothing, so after a
//! barrier rank j holds the sum of every rank's row j. Runs in fp32 and,
//! with `--mode bf16`, in bf16 (round to nearest even).
//!
//! `cargo run -p pld-sim --example all_to_all_combine -- -p a2a3sim -d 0,1,2,3`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Device, Result, Rma, Scalar, bf16};
use std::sync::Arc;

const COLS: u64 = 256;
const ROUNDS: u32 = 4;

struct Combine {
    bf16: bool,
}

async fn combine<T: Scalar, R: Rma + 'static>(dev: &Device<R>) -> Result<Check> {
    let (me, n) = (dev.rank(), dev.world_size());
    let p = u64::from(n);
    let acc = dev.alloc::<T>("acc", "data", [1, COLS])?;
    let signal = dev.alloc::<i32>("signal", "signal", [u64::from(dev.world_size()), 1])?;
    let x = launch::input::<T>("x", me, [p, COLS]);
    // Several rounds, so that adds from different ranks overlap.
    for _ in 0..ROUNDS {
        for j in (0..p).map(|j| (j + u64::from(me)) % p) {
            let row = dev.load(&x, [j, 0], [1, COLS]).await?;
            dev.remote_store(&row, &acc, j as u32, [0, 0], Atomic::Add)
                .await?;
        }
    }
    dev.barrier(&signal).await?;
    let y = dev.read_own(&acc).await?;
    let mut want = vec![0f64; COLS as usize];
    for r in 0..n {
        let xr = launch::input::<T>("x", r, [p, COLS]);
        for (c, w) in want.iter_mut().enumerate() {
            *w += f64::from(ROUNDS) * xr.at(u64::from(me), c as u64).to_f64();
        }
    }
    let want: Vec<T> = want.into_iter().map(T::from_f64).collect();
    Ok(Check::close(y.data(), &want, 1e-5))
}

impl Program for Combine {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        if self.bf16 {
            combine::<bf16, R>(&dev).await
        } else {
            combine::<f32, R>(&dev).await
        }
    }
}

fn main() {
    launch::main(|a| {
        Ok(Combine {
            bf16: a.mode(&["fp32", "bf16"])? == "bf16",
        })
    });
}
