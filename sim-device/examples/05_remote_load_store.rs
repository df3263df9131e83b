//! Step 05 — tile-level RMA: a one-step ring shift after a barrier.
//! `--mode load` pulls the next rank's slice (`y[r] = x[(r+1) % N]`);
//! `--mode store` pushes into the next rank's slice and reads its own back
//! (`y[r] = x[(r-1) % N]`). The same barrier orders both.
//!
//! `cargo run --release -p pld-sim --example 05_remote_load_store -- -p a2a3sim -d 0,1 --mode store`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Device, Result, Rma, Tensor, nranks, rank};
use std::sync::Arc;

const SIZE: u64 = 1024;

struct RemoteLoadStore {
    store: bool,
}

impl Program for RemoteLoadStore {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let data = dev.alloc::<f32>("data", "data", [1, SIZE])?;
        let signal = dev.alloc::<i32>("signal", "signal", [u64::from(dev.world_size()), 1])?;
        let ctx = dev.get_comm_ctx(&data);
        let my_rank = rank(ctx);
        debug_assert!(my_rank < nranks(ctx));
        let x = launch::input::<f32>("x", my_rank, [1, SIZE]);
        let mut y = Tensor::zeros("y", [1, SIZE]);
        let peer = dev.peer_next(1);
        let from = if self.store {
            // Push: store into the next rank, barrier, read our own slice,
            // which the previous rank has just written.
            let local = dev.load(&x, [0, 0], [1, SIZE]).await?;
            dev.tile_remote_store(&local, &data, peer, [0, 0], Atomic::None)
                .await?;
            dev.barrier(&signal).await?;
            let back = dev.load(&data, [0, 0], [1, SIZE]).await?;
            dev.store(&back, [0, 0], &mut y).await?;
            dev.peer_prev(1)
        } else {
            // Pull: stage into our window, barrier, load the next rank's.
            let local = dev.load(&x, [0, 0], [1, SIZE]).await?;
            dev.store(&local, [0, 0], &data).await?;
            dev.barrier(&signal).await?;
            let recv = dev
                .remote_load(&data, peer, [0, 0], [1, SIZE], None)
                .await?;
            dev.store(&recv, [0, 0], &mut y).await?;
            peer
        };
        let want = launch::input::<f32>("x", from, [1, SIZE]);
        Ok(Check::exact(y.data(), want.data()))
    }
}

fn main() {
    launch::main(|a| {
        Ok(RemoteLoadStore {
            store: a.mode(&["load", "store"])? == "store",
        })
    });
}
