//! Step 08 — all-reduce, mesh, by hand: every rank remote_stores its tile
//! into row r of every rank's `[P, SIZE]` window view, one barrier, then
//! each rank loads the P rows and adds them on chip.
//!
//! `cargo run -p pld-sim --example 08_allreduce_mesh -- -p a2a3sim -d 0,1`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Device, Result, Rma, Tensor};
use std::sync::Arc;

const SIZE: u64 = 1024;

struct Mesh;

impl Program for Mesh {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let slots = dev.alloc::<f32>("slots", "data", [u64::from(n), SIZE])?;
        let signal = dev.alloc::<i32>("signal", "signal", [1, 8])?;
        let x = launch::input::<f32>("x", me, [1, SIZE]);
        let local = dev.load(&x, [0, 0], [1, SIZE]).await?;
        for peer in 0..n {
            dev.tile_remote_store(&local, &slots, peer, [u64::from(me), 0], Atomic::None)
                .await?;
        }
        drop(local);
        dev.barrier(&signal).await?;
        let mut acc = dev.load(&slots, [0, 0], [1, SIZE]).await?;
        for r in 1..u64::from(n) {
            let row = dev.load(&slots, [r, 0], [1, SIZE]).await?;
            acc = acc.add(&row)?;
        }
        let mut y = Tensor::zeros("y", [1, SIZE]);
        dev.store(&acc, [0, 0], &mut y).await?;
        Ok(Check::close(y.data(), &golden(n), 1e-5))
    }
}

fn golden(n: u32) -> Vec<f32> {
    let mut want = vec![0f32; SIZE as usize];
    for r in 0..n {
        for (w, v) in want
            .iter_mut()
            .zip(launch::input::<f32>("x", r, [1, SIZE]).data())
        {
            *w += v;
        }
    }
    want
}

fn main() {
    launch::main(|_| Ok(Mesh));
}
