"""Step 07 — put / get for any number of ranks, with a region larger than
on-chip memory streamed in pipelined chunks: a ``[512, 512]`` fp32 block
(1 MiB) moves in ``64 x 256`` chunks, and only its interior
``[1:511, 1:511]`` is shifted, so the strided 2-D path runs too.
``--mode put``: ``y[r]`` interior = ``x[(r - 1) % N]``; ``--mode get``:
``x[(r + 1) % N]``.

    pld-pypto examples/07_put_get_any_p.py -p a2a3sim -d 0,1,2,3 --mode get
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

N = 512
INNER = [N - 2, N - 2]
CHUNKS = dict(chunk_rows=64, chunk_cols=256, pipeline=True)


def build(get_mode, n):
    @pl.jit
    def step(x, y, data, signal, barrier):
        ctx = pld.get_comm_ctx(data)
        me, nr = pld.rank(ctx), pld.nranks(ctx)
        nxt, prv = (me + 1) % nr, (me - 1) % nr
        if get_mode:
            pld.tensor.put(data, me, x, **CHUNKS)
            pld.system.notify(signal, prv, [0, 0], 1, op=pld.NotifyOp.Set)
            pld.system.wait(signal, [0, 0], 1, cmp=pld.WaitCmp.Eq)
            pld.tensor.get(y, nxt, data, [1, 1], [1, 1], INNER, **CHUNKS)
        else:
            pld.tensor.put(data, nxt, x, [1, 1], [1, 1], INNER, **CHUNKS)
            pld.system.notify(signal, nxt, [0, 0], 1, op=pld.NotifyOp.Set)
            pld.system.wait(signal, [0, 0], 1, cmp=pld.WaitCmp.Eq)
            pld.tensor.get(y, me, data, [1, 1], [1, 1], INNER, **CHUNKS)
        # Nobody leaves while a peer may still read its window.
        pld.tensor.barrier(barrier)
        return y

    @pl.jit.host
    def ring(x, y):
        data_buf = pld.alloc_window_buffer([N, N], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        barrier_buf = pld.alloc_window_buffer([n, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            data = pld.window(data_buf, [N, N], dtype=pl.FP32)
            signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
            barrier = pld.window(barrier_buf, [n, 1], dtype=pl.INT32)
            step(x[r], y[r], data, signal, barrier, device=r)

    return ring


def main():
    parser = argparse.ArgumentParser(description="07_put_get_any_p")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1,2,3")
    parser.add_argument("--mode", default="put", choices=["put", "get"])
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    x = np.random.default_rng(7).standard_normal((n, N, N)).astype(np.float32)
    y = np.zeros_like(x)
    config = RunConfig(platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    compiled = build(args.mode == "get", n).compile(x, y, config=config)
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(x, y, config=config)
    shift = 1 if args.mode == "get" else -1
    want = np.zeros_like(x)
    for r in range(n):
        want[r, 1:N - 1, 1:N - 1] = x[(r + shift) % n, 1:N - 1, 1:N - 1]
    assert np.array_equal(y, want), f"max diff {np.abs(y - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
