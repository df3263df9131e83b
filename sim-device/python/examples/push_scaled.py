"""The seed's tensor-level push: a ``@pl.jit`` kernel has no tile to
name, so it scales a slice of its tensor (``pl.mul(x[0:ROWS, 0:COLS],
2.0)``) and pushes it with ``pld.tensor.remote_store`` — one put message —
into the next rank's window, then releases it with notify / wait.
``y[r] = 2 * x[(r - 1) % N][0:ROWS, 0:COLS]``. Any P.

    pld-pypto examples/push_scaled.py -p a2a3sim -d 0,1,2
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

ROWS, COLS = 8, 64


@pl.jit
def push_scaled(x, y, win, signal):
    ctx = pld.get_comm_ctx(win)
    peer = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP):
        scaled = pl.mul(x[0:ROWS, 0:COLS], 2.0)
        pld.tensor.remote_store(scaled, win, peer, [0, 0])
    pld.system.notify(signal, peer, [0, 0], 1, op=pld.NotifyOp.Set)
    pld.system.wait(signal, [0, 0], 1, cmp=pld.WaitCmp.Eq)
    return pl.store(pl.load(win, [0, 0], [ROWS, COLS]), [0, 0], y)


@pl.jit.host
def program(x, y):
    win_buf = pld.alloc_window_buffer([ROWS, COLS], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        win = pld.window(win_buf, [ROWS, COLS], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        push_scaled(x[r], y[r], win, signal, device=r)


def main():
    parser = argparse.ArgumentParser(description="push_scaled")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    x = np.random.default_rng(21).standard_normal((n, 2 * ROWS, COLS)).astype(np.float32)
    y = np.zeros((n, ROWS, COLS), dtype=np.float32)
    config = RunConfig(platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    compiled = program.compile(x, y, config=config)
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(x, y, config=config)
    want = np.stack([2 * x[(r - 1) % n, 0:ROWS, 0:COLS] for r in range(n)])
    assert np.allclose(y, want, rtol=1e-6, atol=1e-6), f"max diff {np.abs(y - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
