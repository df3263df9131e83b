//! The device's op latencies, for comparison with the same ops through
//! pld-pypto (`sim-device/python/bench/compare.sh` runs both in one run):
//! rank 0 times `remote_load` and `tile_remote_store` of 256 B (a `[1, 64]`
//! fp32 tile) and a 1 MiB `put` (`[256, 1024]` fp32) to rank 1, each a
//! blocking call, mean over the iterations after a 10 % warm-up.
//!
//! `cargo run -p pld-sim --example device_bench -- -d 0,1 [--transport tcp]`

use pld_sim::launch::{self, Check, Program};
use pld_sim::{Atomic, Device, PutOpts, Result, Rma, Tensor};
use std::sync::Arc;
use std::time::Instant;

const SMALL_ITERS: u32 = 2000;
const BIG_ITERS: u32 = 50;

struct Bench;

/// Mean microseconds of `iters` runs of `op` after a 10 % warm-up.
async fn time<F, Fut>(iters: u32, mut op: F) -> Result<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    for _ in 0..iters / 10 {
        op().await?;
    }
    let t = Instant::now();
    for _ in 0..iters {
        op().await?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / f64::from(iters))
}

impl Program for Bench {
    fn windows(&self) -> Vec<(String, u64)> {
        vec![("data".into(), 4 << 20), ("signal".into(), 64 << 10)]
    }

    async fn run<R: Rma + 'static>(&self, dev: Arc<Device<R>>) -> Result<Check> {
        let n = u64::from(dev.world_size());
        let small = dev.alloc::<f32>("small", "data", [1, 64])?;
        let big = dev.alloc::<f32>("big", "data", [256, 1024])?;
        let signal = dev.alloc::<i32>("signal", "signal", [n, 1])?;
        if dev.rank() == 0 {
            let tile = dev
                .load(&launch::input::<f32>("x", 0, [1, 64]), [0, 0], [1, 64])
                .await?;
            let load = time(SMALL_ITERS, || async {
                dev.remote_load(&small, 1, [0, 0], [1, 64], None)
                    .await
                    .map(drop)
            })
            .await?;
            let store = time(SMALL_ITERS, || async {
                dev.tile_remote_store(&tile, &small, 1, [0, 0], Atomic::None)
                    .await
            })
            .await?;
            let x = Tensor::<f32>::zeros("x", [256, 1024]);
            let put = time(BIG_ITERS, || async {
                dev.put(&big, 1, &x, PutOpts::default()).await
            })
            .await?;
            println!("remote_load 256B {load:.1} us");
            println!("remote_store 256B {store:.1} us");
            println!("put 1MiB {put:.1} us {:.0} MB/s", (1 << 20) as f64 / put);
        }
        dev.barrier(&signal).await?;
        Ok(Check::default())
    }
}

fn main() {
    launch::main(|_| Ok(Bench));
}
