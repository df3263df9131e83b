//! Step 16 — putting it together, as the tutorial composes it: broadcast
//! root's weights, all-reduce (mesh) the per-rank slices, all-gather the
//! per-rank slices, then scale the gathered rows by the broadcast weights
//! on chip — one signal per collective. Goldens: `allred[r] = Σₖ x[k]` and
//! `gathered[r] = concat(x[0]·w, …, x[P−1]·w)`, which also proves the
//! weights reached every rank.
//!
//! `cargo run -p pld-sim --example 16_putting_it_together -- -p a2a3sim -d 0,1,2,3`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Algo, Device, Dtype, ReduceOp, Result, Rma, Tensor, rank};
use std::sync::Arc;

const SIZE: u64 = 64;
const ROOT: u32 = 0;

struct Together;

impl Program for Together {
    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let n = dev.world_size();
        let nr = u64::from(n);
        let f32s = |name: &str, dims: &[u64]| dev.alloc_window_buffer_of(name, dims, Dtype::Fp32);
        let w_buf = f32s("w", &[1, SIZE])?;
        let ar_buf = f32s("ar", &[1, SIZE])?;
        let ag_buf = f32s("ag", &[nr, SIZE])?;
        let sig = |name: &str| dev.alloc_window_buffer_of(name, &[nr, 1], Dtype::Int32);
        let (sig_bcast_buf, sig_ar_buf, sig_ag_buf) =
            (sig("sig_bcast")?, sig("sig_ar")?, sig("sig_ag")?);
        let w_data = dev.window::<f32>(&w_buf, &[1, SIZE])?;
        let ar_data = dev.window::<f32>(&ar_buf, &[1, SIZE])?;
        let ag_data = dev.window::<f32>(&ag_buf, &[nr, SIZE])?;
        let sig_bcast = dev.window::<i32>(&sig_bcast_buf, &[nr, 1])?;
        let sig_ar = dev.window::<i32>(&sig_ar_buf, &[nr, 1])?;
        let sig_ag = dev.window::<i32>(&sig_ag_buf, &[nr, 1])?;
        let inputs = launch::input_nd::<f32>("x", n, [1, SIZE]);
        let weights = Tensor::from_fn("w", [1, SIZE], |i| 1.0 + i as f32);
        let my_rank = rank(dev.get_comm_ctx(&w_data));
        let x = inputs.index(u64::from(my_rank))?;

        // 1 — Broadcast: root stages its weights, every rank gets them.
        if my_rank == ROOT {
            let local_w = dev.load(&weights, [0, 0], [1, SIZE]).await?;
            dev.store(&local_w, [0, 0], &w_data).await?;
        }
        dev.broadcast(&w_data, &sig_bcast, ROOT).await?;
        let w = dev.load(&w_data, [0, 0], [1, SIZE]).await?;

        // 2 — All-reduce (mesh) the per-rank slices.
        let local_x = dev.load(&x, [0, 0], [1, SIZE]).await?;
        dev.store(&local_x, [0, 0], &ar_data).await?;
        dev.allreduce(&ar_data, &sig_ar, ReduceOp::Sum, Algo::Mesh)
            .await?;
        let total = dev.load(&ar_data, [0, 0], [1, SIZE]).await?;
        let mut allred = Tensor::zeros("allred", [1, SIZE]);
        dev.store(&total, [0, 0], &mut allred).await?;

        // 3 — All-gather the raw slices (push-based; the source is a tensor).
        dev.allgather(&x, &ag_data, &sig_ag).await?;

        // 4 — Scale the gathered rows by the broadcast weights, on chip.
        let mut gathered = Tensor::zeros("gathered", [1, nr * SIZE]);
        for src in 0..nr {
            let chunk = dev.load(&ag_data, [src, 0], [1, SIZE]).await?;
            dev.store(&chunk.mul(&w)?, [0, src * SIZE], &mut gathered)
                .await?;
        }

        let want_allred = launch::sum_of_slices(&inputs)?;
        let want_gathered: Vec<f32> = inputs
            .data()
            .chunks(SIZE as usize)
            .flat_map(|row| {
                row.iter()
                    .zip(weights.data())
                    .map(|(a, b)| a * b)
                    .collect::<Vec<_>>()
            })
            .collect();
        Ok(
            Check::close(allred.data(), &want_allred, 1e-5).and(Check::close(
                gathered.data(),
                &want_gathered,
                1e-5,
            )),
        )
    }
}

fn main() {
    launch::main(|_| Ok(Together));
}
