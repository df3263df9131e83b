"""The all-to-all combine: every rank adds its row j into rank j's
accumulator with ``pld.remote_store(..., atomic=pld.AtomicType.Add)``, all
at once and in no particular order, several rounds; atomic adds lose
nothing, so after a barrier rank j holds ROUNDS times the sum of every
rank's row j. ``--mode fp32`` (default) or ``fp16``. Any P.

    pld-pypto examples/all_to_all_combine.py -p a2a3sim -d 0,1,2,3
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

COLS = 64
ROUNDS = 4
DTYPES = {"fp32": (pl.FP32, np.float32), "fp16": (pl.FP16, np.float16)}


def build(n, dtype):
    @pl.jit.incore
    def combine(x, y, acc, signal):
        me = pld.rank(pld.get_comm_ctx(acc))
        for _ in pl.range(ROUNDS):
            for k in pl.range(n):
                j = (k + me) % n
                pld.remote_store(pl.load(x, [j, 0], [1, COLS]), acc, j, [0, 0], atomic=pld.AtomicType.Add)
        signal = pld.tensor.barrier(signal)
        return pl.store(pl.load(acc, [0, 0], [1, COLS]), [0, 0], y)

    @pl.jit.host
    def program(x, y):
        acc_buf = pld.alloc_window_buffer([1, COLS], dtype=dtype)
        signal_buf = pld.alloc_window_buffer([n, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            acc = pld.window(acc_buf, [1, COLS], dtype=dtype)
            signal = pld.window(signal_buf, [n, 1], dtype=pl.INT32)
            combine(x[r], y[r], acc, signal, device=r)

    return program


def main():
    parser = argparse.ArgumentParser(description="all_to_all_combine")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1")
    parser.add_argument("--mode", default="fp32", choices=sorted(DTYPES))
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    pl_dtype, np_dtype = DTYPES[args.mode]
    # Small integers: exact in every dtype, whatever the order of the adds.
    x = np.random.default_rng(22).integers(-8, 9, (n, n, COLS)).astype(np_dtype)
    y = np.zeros((n, 1, COLS), dtype=np_dtype)
    config = RunConfig(platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    compiled = build(n, pl_dtype).compile(x, y, config=config)
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(x, y, config=config)
    want = np.stack([ROUNDS * x[:, j, :].astype(np.float64).sum(axis=0, keepdims=True) for j in range(n)])
    assert np.allclose(y.astype(np.float64), want, rtol=1e-5, atol=1e-5), f"max diff {np.abs(y - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
