"""Step 11 — the reveal: ``pld.tensor.allreduce(data, signal, op=, mode=)``
in one call, ``--mode mesh`` (signal ``[P, 1]``) or ``--mode ring``
(signal ``[2(P-1), P]``). Stage-in and stage-out stay the kernel's. The
same signal serves all four reductions in a row (it clears itself).

    pld-pypto examples/11_allreduce_builtin.py -p a2a3sim -d 0,1,2,3 --mode ring
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64
OPS = [pld.ReduceOp.Sum, pld.ReduceOp.Max, pld.ReduceOp.Min, pld.ReduceOp.Prod]


def build(nr, mode):
    sig = [nr, 1] if mode == "mesh" else [2 * max(nr - 1, 1), nr]

    @pl.program
    class Builtin:
        @pl.function(type=pl.FunctionType.InCore)
        def reduce_step(self, x, y, data, signal):
            for k, op in enumerate(OPS):
                data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
                data = pld.tensor.allreduce(data, signal, op=op, mode=mode)
                y = pl.store(pl.load(data, [0, 0], [1, SIZE]), [k, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def allreduce(self, x, y):
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer(sig, dtype=pl.INT32)
            for r in pl.range(nr):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, sig, dtype=pl.INT32)
                self.reduce_step(x[r], y[r], data, signal, device=r)
            return y

    return Builtin


def main():
    parser = argparse.ArgumentParser(description="11_allreduce_builtin")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1,2,3")
    parser.add_argument("--mode", default="mesh", choices=["mesh", "ring"])
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    x = (np.random.default_rng(11).integers(-3, 4, (n, 1, SIZE))).astype(np.float32)
    y = np.zeros((n, len(OPS), SIZE), dtype=np.float32)
    compiled = ir.compile(build(n, args.mode), platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(x, y)
    folds = [x.sum(axis=0), x.max(axis=0), x.min(axis=0), x.prod(axis=0)]
    want = np.stack([np.concatenate(folds)] * n)
    assert np.allclose(y, want, rtol=1e-5, atol=1e-5), f"max diff {np.abs(y - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
