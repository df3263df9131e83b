//! Step 04 — signals only: an N-rank barrier for one rendezvous, built
//! from notify/wait, as the tutorial writes it. Each rank owns row
//! `my_rank` of every peer's `[N, 1]` signal: it AtomicAdds 1 there on
//! every peer, then waits (Ge 1) on every peer's row of its own signal.
//! Afterwards rank r's signal reads 1 in every row but its own — the
//! output, which proves every peer arrived.
//!
//! `--use-builtin` is the reveal: `Device::barrier(signal)` (a
//! dissemination barrier through the same `[N, 1]` signal) orders a
//! `remote_load` after every rank staged its slice: `y[r] = x[(r+1) % N]`.
//! A second builtin barrier on the same signal shows it is reusable.
//!
//! `cargo run -p pld-sim --example 04_barrier -- -p a2a3sim -d 0,1 [--use-builtin]`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Cmp, Device, Dtype, NotifyOp, Result, Rma, Tensor, nranks, rank};
use std::sync::Arc;

const SIZE: u64 = 64;

struct Barrier {
    builtin: bool,
}

impl Barrier {
    async fn hand<R: Rma>(&self, dev: &Device<R>) -> Result<Check> {
        let n = u64::from(dev.world_size());
        let signal_buf = dev.alloc_window_buffer_of("signal", &[n, 1], Dtype::Int32)?;
        let signal = dev.window::<i32>(&signal_buf, &[n, 1])?;
        let ctx = dev.get_comm_ctx(&signal);
        let my_rank = rank(ctx);
        for peer in (0..nranks(ctx)).filter(|p| *p != my_rank) {
            dev.notify(
                &signal,
                peer,
                [u64::from(my_rank), 0],
                1,
                NotifyOp::AtomicAdd,
            )
            .await?;
        }
        for src in (0..nranks(ctx)).filter(|s| *s != my_rank) {
            dev.wait(&signal, [u64::from(src), 0], 1, Cmp::Ge).await?;
        }
        // Surface the signal rows as the observable (pl.read / pl.write).
        let y = dev.read_own(&signal).await?;
        let want: Vec<i32> = (0..n).map(|i| i32::from(i != u64::from(my_rank))).collect();
        Ok(Check::exact(y.data(), &want))
    }

    async fn builtin<R: Rma>(&self, dev: &Device<R>) -> Result<Check> {
        let n = dev.world_size();
        let data_buf = dev.alloc_window_buffer_of("data", &[1, SIZE], Dtype::Fp32)?;
        let signal_buf = dev.alloc_window_buffer_of("signal", &[u64::from(n), 1], Dtype::Int32)?;
        let data = dev.window::<f32>(&data_buf, &[1, SIZE])?;
        let signal = dev.window::<i32>(&signal_buf, &[u64::from(n), 1])?;
        // The host's x[N, 1, SIZE]; this rank's slice is x[r].
        let x = launch::input_nd::<f32>("x", n, [1, SIZE]);
        let my_rank = rank(dev.get_comm_ctx(&data));
        let xr = x.index(u64::from(my_rank))?;
        let local = dev.load(&xr, [0, 0], [1, SIZE]).await?;
        dev.store(&local, [0, 0], &data).await?;
        dev.barrier(&signal).await?;
        let peer = dev.peer_next(1);
        let recv = dev
            .remote_load(&data, peer, [0, 0], [1, SIZE], None)
            .await?;
        let mut y = Tensor::zeros("y", [1, SIZE]);
        dev.store(&recv, [0, 0], &mut y).await?;
        // Reused: nobody leaves (and lets its window go) while a peer reads.
        dev.barrier(&signal).await?;
        Ok(Check::close(
            y.data(),
            x.index(u64::from(peer))?.data(),
            1e-5,
        ))
    }
}

impl Program for Barrier {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        if self.builtin {
            self.builtin(&dev).await
        } else {
            self.hand(&dev).await
        }
    }
}

fn main() {
    launch::main(|a| {
        Ok(Barrier {
            builtin: a.builtin()?,
        })
    });
}
