//! The seed's tensor-level `push_scaled`: compute `2·x` and remote_store
//! the result straight to the next rank — one put message, no round trip
//! through global memory — then release it with notify.
//!
//! `cargo run -p pld-sim --example push_scaled -- -p a2a3sim -d 0,1`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Cmp, Device, NotifyOp, Result, Rma};
use std::sync::Arc;

const ROWS: u64 = 16;
const COLS: u64 = 64;

struct PushScaled;

impl Program for PushScaled {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let me = dev.rank();
        let win = dev.alloc::<f32>("win", "data", [ROWS, COLS])?;
        let signal = dev.alloc::<i32>("signal", "signal", [1, 1])?;
        let x = launch::input::<f32>("x", me, [2 * ROWS, COLS]);
        let peer = dev.peer_next(1);
        // with pl.at(level=CORE_GROUP): scaled = pl.mul(x[0:ROWS, 0:COLS], 2.0)
        let scaled = x.slice([0, 0], [ROWS, COLS])?.mul_scalar(2.0);
        dev.remote_store(&scaled, &win, peer, [0, 0], Atomic::None)
            .await?;
        dev.notify(&signal, peer, [0, 0], 1, NotifyOp::Set).await?;
        dev.wait(&signal, [0, 0], 1, Cmp::Eq).await?;
        let y = dev.read_own(&win).await?;
        let from = launch::input::<f32>("x", dev.peer_prev(1), [2 * ROWS, COLS]);
        let want = from.slice([0, 0], [ROWS, COLS])?.mul_scalar(2.0);
        Ok(Check::exact(y.data(), want.data()))
    }
}

fn main() {
    launch::main(|_| Ok(PushScaled));
}
