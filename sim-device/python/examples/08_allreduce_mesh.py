"""Step 08 — all-reduce v1 (mesh): stage this rank's slice, a notify/wait
barrier (each rank owns row ``my_rank`` of every peer's ``[P, 1]``
signal), pull every peer's slice with ``remote_load`` and add on chip.
The class form with a rank-count factory, as the tutorial builds it.

    pld-pypto examples/08_allreduce_mesh.py -p a2a3sim -d 0,1,2,3
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
    class MeshAllreduce:
        @pl.function(type=pl.FunctionType.InCore)
        def reduce_step(self, x, y, data, signal):
            me = pld.rank(pld.get_comm_ctx(data))
            data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
            for peer in pl.range(nr):
                if peer != me:
                    pld.system.notify(signal, peer=peer, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            for src in pl.range(nr):
                if src != me:
                    pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
            acc = pl.load(data, [0, 0], [1, SIZE])
            for peer in pl.range(nr):
                if peer != me:
                    acc = pl.add(acc, pld.tile.remote_load(data, peer=peer, offsets=[0, 0], shape=[1, SIZE]))
            return pl.store(acc, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(self, x, y, data, signal):
            return self.reduce_step(x, y, data, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def mesh_allreduce(self, x, y):
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, signal, device=r)
            return y

    return MeshAllreduce


def main():
    parser = argparse.ArgumentParser(description="08_allreduce_mesh")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1,2,3")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    x = np.random.default_rng(8).standard_normal((n, 1, SIZE)).astype(np.float32)
    y = np.zeros_like(x)
    compiled = ir.compile(build(n), platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(x, y)
    want = np.stack([x.sum(axis=0)] * n)
    assert np.allclose(y, want, rtol=1e-5, atol=1e-5), f"max diff {np.abs(y - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
