//! Step 10 — all-reduce v3 (ring), as the tutorial writes it: a chunked
//! reduce-scatter then all-gather, each rank only ever reading its left
//! neighbour, one chunk of SIZE/P per step for 2·(P−1) steps. The signal
//! is `[2(P−1), P]`, one row per round: notify the right neighbour after a
//! store, wait on the left one before a `remote_load`.
//!
//! One addition to the tutorial's schedule: two acknowledgements. In the
//! all-gather a rank overwrites chunks that its right neighbour reads in
//! the reduce-scatter; at P ≥ 3 nothing stops a fast rank from doing so
//! before a slow right neighbour has read them (the fatal trap of SPEC §5,
//! caught in review). Each rank therefore tells its left neighbour when
//! it has done reading it (cell `[0, left]` after the reduce-scatter,
//! `[1, left]` after the all-gather — the neighbour's own column, which no
//! ready signal uses) and waits for its right neighbour's word before
//! overwriting and before returning. SIZE must split into P chunks.
//!
//! `cargo run -p pld-sim --example 10_allreduce_ring -- -p a2a3sim -d 0,1,2,3`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Cmp, Device, Dtype, Error, NotifyOp, Result, Rma, Tensor};
use std::sync::Arc;

const SIZE: u64 = 64;

struct Ring;

impl Program for Ring {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let (me, n) = (dev.rank(), dev.world_size());
        let nr = u64::from(n);
        let (chunk, rounds) = (SIZE / nr, 2 * (nr - 1));
        let scratch_buf = dev.alloc_window_buffer_of("scratch", &[1, SIZE], Dtype::Fp32)?;
        let signal_buf = dev.alloc_window_buffer_of("signal", &[rounds, nr], Dtype::Int32)?;
        let scratch = dev.window::<f32>(&scratch_buf, &[1, SIZE])?;
        let signal = dev.window::<i32>(&signal_buf, &[rounds, nr])?;
        let x = launch::input_nd::<f32>("x", n, [1, SIZE]);
        let xr = x.index(u64::from(me))?;
        let (left, right) = (dev.peer_prev(1), dev.peer_next(1));
        let (mu, lu) = (u64::from(me), u64::from(left));
        let add = NotifyOp::AtomicAdd;

        // Phase 1 — stage-in, then tell the right neighbour (row 0).
        for c in 0..nr {
            let t = dev.load(&xr, [0, c * chunk], [1, chunk]).await?;
            dev.store(&t, [0, c * chunk], &scratch).await?;
        }
        dev.notify(&signal, right, [0, mu], 1, add).await?;

        // Phase 2 — reduce-scatter: in step s add the left neighbour's
        // chunk (r − s − 2) mod P into ours.
        for s in 0..nr - 1 {
            dev.wait(&signal, [s, lu], 1, Cmp::Ge).await?;
            let idx = u64::from(dev.peer_prev(s as i64 + 2));
            let recv = dev
                .remote_load(&scratch, left, [0, idx * chunk], [1, chunk], None)
                .await?;
            let acc = dev.load(&scratch, [0, idx * chunk], [1, chunk]).await?;
            dev.store(&acc.add(&recv)?, [0, idx * chunk], &scratch)
                .await?;
            dev.notify(&signal, right, [s + 1, mu], 1, add).await?;
        }
        // Done reading the left neighbour; wait until the right one is
        // done reading us before the all-gather overwrites.
        dev.notify(&signal, left, [0, lu], 1, add).await?;
        dev.wait(&signal, [0, mu], 1, Cmp::Ge).await?;

        // Phase 3 — all-gather: copy the left neighbour's chunk (r − s − 1).
        for s in 0..nr - 1 {
            dev.wait(&signal, [nr - 1 + s, lu], 1, Cmp::Ge).await?;
            let idx = u64::from(dev.peer_prev(s as i64 + 1));
            let recv = dev
                .remote_load(&scratch, left, [0, idx * chunk], [1, chunk], None)
                .await?;
            dev.store(&recv, [0, idx * chunk], &scratch).await?;
            if s + 2 < nr {
                dev.notify(&signal, right, [nr + s, mu], 1, add).await?;
            }
        }
        dev.notify(&signal, left, [1, lu], 1, add).await?;
        dev.wait(&signal, [1, mu], 1, Cmp::Ge).await?;

        // Phase 4 — stage-out.
        let mut y = Tensor::zeros("y", [1, SIZE]);
        for c in 0..nr {
            let t = dev.load(&scratch, [0, c * chunk], [1, chunk]).await?;
            dev.store(&t, [0, c * chunk], &mut y).await?;
        }
        Ok(Check::close(y.data(), &launch::sum_of_slices(&x)?, 1e-5))
    }
}

fn main() {
    launch::main(|a| {
        let n = a.nranks();
        if n < 2 || SIZE % u64::from(n) != 0 {
            return Err(Error::Usage(format!(
                "SIZE={SIZE} must split into the rank count: run with P = 2, 4 or 8 ranks, not {n}"
            )));
        }
        Ok(Ring)
    });
}
