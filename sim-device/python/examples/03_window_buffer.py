"""Step 03 — window buffers: each rank stages its slice into its own view
of a window buffer and reads it back; the window, unlike ``x`` and ``y``,
is what peers could reach. Any P.

    pld-pypto examples/03_window_buffer.py -p a2a3sim -d 0,1
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

SIZE = 64


@pl.jit.incore
def roundtrip(x, y, data):
    data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
    return pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)


@pl.jit.host
def program(x, y):
    data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        roundtrip(x[r], y[r], pld.window(data_buf, [1, SIZE], dtype=pl.FP32), device=r)


def main():
    parser = argparse.ArgumentParser(description="03_window_buffer")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    x = np.random.default_rng(3).standard_normal((n, 1, SIZE)).astype(np.float32)
    y = np.zeros_like(x)
    config = RunConfig(platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    compiled = program.compile(x, y, config=config)
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(x, y, config=config)
    assert np.array_equal(y, x), f"max diff {np.abs(y - x).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
