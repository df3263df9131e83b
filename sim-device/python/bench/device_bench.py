"""The same ops as ``sim-device/examples/device_bench.rs``, through
pld-pypto: rank 0 times ``pld.tile.remote_load`` and
``pld.tile.remote_store`` of 256 B (a ``[1, 64]`` fp32 tile) and a 1 MiB
``pld.tensor.put`` (``[256, 1024]`` fp32) to rank 1, each a blocking call,
mean over the iterations after a 10 % warm-up.

    pld-pypto sim-device/python/bench/device_bench.py -d 0,1
"""

import argparse
import time

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

SMALL_ITERS, BIG_ITERS = 2000, 50


def mean_us(iters, op):
    for _ in range(iters // 10):
        op()
    t = time.perf_counter()
    for _ in range(iters):
        op()
    return (time.perf_counter() - t) * 1e6 / iters


def build(n):
    @pl.jit.incore
    def bench(x, big_x, out, small, big, signal):
        if pld.rank(pld.get_comm_ctx(small)) == 0:
            tile = pl.load(x, [0, 0], [1, 64])
            out[0] = mean_us(SMALL_ITERS, lambda: pld.tile.remote_load(small, 1, [0, 0], [1, 64]))
            out[1] = mean_us(SMALL_ITERS, lambda: pld.tile.remote_store(tile, small, 1, [0, 0]))
            out[2] = mean_us(BIG_ITERS, lambda: pld.tensor.put(big, 1, big_x))
        pld.tensor.barrier(signal)

    @pl.jit.host
    def program(x, big_x, out):
        small_buf = pld.alloc_window_buffer([1, 64], dtype=pl.FP32)
        big_buf = pld.alloc_window_buffer([256, 1024], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([n, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            small = pld.window(small_buf, [1, 64], dtype=pl.FP32)
            big = pld.window(big_buf, [256, 1024], dtype=pl.FP32)
            signal = pld.window(signal_buf, [n, 1], dtype=pl.INT32)
            bench(x, big_x, out[r], small, big, signal, device=r)

    return program


def main():
    parser = argparse.ArgumentParser(description="device_bench")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    x = np.ones((1, 64), np.float32)
    big_x = np.zeros((256, 1024), np.float32)
    out = np.zeros((len(ids), 3))
    config = RunConfig(platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    build(len(ids)).compile(x, big_x, out, config=config)(x, big_x, out, config=config)
    load, store, put = out[0]
    print(f"remote_load 256B {load:.1f} us")
    print(f"remote_store 256B {store:.1f} us")
    print(f"put 1MiB {put:.1f} us {(1 << 20) / put:.0f} MB/s")


if __name__ == "__main__":
    raise SystemExit(main())
