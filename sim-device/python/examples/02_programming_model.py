"""Step 02 — the programming model: a host orchestrator dispatches one
kernel per device; each kernel scales its rank's slice by ``r + 1``
(integer arithmetic on the rank, a cast only for the data). The class form
(``@pl.program`` with ``pl.function``) as the tutorial's later steps use.

    pld-pypto examples/02_programming_model.py -p a2a3sim -d 0,1,2
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


def build(nr):
    @pl.program
    class Scale:
        @pl.function(type=pl.FunctionType.InCore)
        def scale(self, x, y, data):
            me = pld.rank(pld.get_comm_ctx(data))
            t = pl.load(x, [0, 0], [1, SIZE])
            return pl.store(pl.mul(t, me + 1), [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(self, x, y, data):
            return self.scale(x, y, data)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x, y):
            data_buf = pld.alloc_window_buffer(SIZE * pl.FP32.get_byte())
            for r in pl.range(nr):
                self.per_rank(x[r], y[r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32), device=r)
            return y

    return Scale


def main():
    parser = argparse.ArgumentParser(description="02_programming_model")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    x = np.random.default_rng(2).standard_normal((n, 1, SIZE)).astype(np.float32)
    y = np.zeros_like(x)
    compiled = ir.compile(build(n), platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(x, y)
    want = np.stack([x[r] * (r + 1) for r in range(n)])
    assert np.allclose(y, want, rtol=1e-6, atol=1e-6), f"max diff {np.abs(y - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
