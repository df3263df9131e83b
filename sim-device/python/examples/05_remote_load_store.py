"""Step 05 — tile-level RMA on pld: a one-step ring shift, two ways.

``--mode load`` (default): every rank stages its slice of ``x`` into its
window, a barrier orders the stage before any read, then each rank pulls
the next rank's slice with ``pld.tile.remote_load``: ``y[r] = x[(r+1) % N]``.
``--mode store``: each rank pushes its slice into the next rank's window
with ``pld.tile.remote_store``, a barrier, then reads its own window back:
``y[r] = x[(r-1) % N]``. The same barrier orders both.

    pld-pypto examples/05_remote_load_store.py -p a2a3sim -d 0,1 --mode store
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

SIZE = 64


@pl.jit.incore
def shift_by_load(x, y, data, signal):
    ctx = pld.get_comm_ctx(data)
    me, n = pld.rank(ctx), pld.nranks(ctx)
    staged = pl.load(x, [0, 0], [1, SIZE])
    data = pl.store(staged, [0, 0], data)
    signal = pld.tensor.barrier(signal)
    recv = pld.tile.remote_load(data, peer=(me + 1) % n, offsets=[0, 0], shape=[1, SIZE])
    return pl.store(recv, [0, 0], y)


@pl.jit.incore
def shift_by_store(x, y, data, signal):
    ctx = pld.get_comm_ctx(data)
    me, n = pld.rank(ctx), pld.nranks(ctx)
    mine = pl.load(x, [0, 0], [1, SIZE])
    pld.tile.remote_store(mine, data, peer=(me + 1) % n, offsets=[0, 0])
    signal = pld.tensor.barrier(signal)
    back = pl.load(data, [0, 0], [1, SIZE])
    return pl.store(back, [0, 0], y)


def build(n_ranks, mode):
    kernel = shift_by_store if mode == "store" else shift_by_load

    @pl.jit
    def per_rank(x, y, data, signal):
        return kernel(x, y, data, signal)

    @pl.jit.host
    def ring_shift(x, y):
        data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([n_ranks, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [n_ranks, 1], dtype=pl.INT32)
            per_rank(x[r], y[r], data, signal, device=r)

    return ring_shift


def main():
    parser = argparse.ArgumentParser(description="05_remote_load_store")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids, any count >= 2")
    parser.add_argument("--mode", default="load", choices=["load", "store"])
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((n, 1, SIZE)).astype(np.float32)
    y = np.zeros((n, 1, SIZE), dtype=np.float32)
    config = RunConfig(platform=args.platform, distributed_config=DistributedConfig(device_ids=ids, num_sub_workers=0))
    compiled = build(n, args.mode).compile(x, y, config=config)
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(x, y, config=config)
    shift = 1 if args.mode == "load" else -1
    want = np.stack([x[(r + shift) % n] for r in range(n)])
    assert np.allclose(y, want, rtol=1e-5, atol=1e-5), f"mismatch: max diff {np.abs(y - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
