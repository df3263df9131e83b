"""Step 14 — reduce-scatter: each rank stages all P chunks of its input
(chunk c at row c of its ``[P, SIZE]`` window) and ends with chunk r
reduced across every rank. ``--mode hand`` (default): a notify/wait
barrier, then sum row ``my_rank`` of every peer. ``--mode builtin``:
``pld.tensor.reduce_scatter(data, signal, op=Sum)``; row ``my_rank`` of the
window then holds the result.

    pld-pypto examples/14_reduce_scatter.py -p a2a3sim -d 0,1,2 --mode builtin
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


def build(nr, builtin):
    @pl.program
    class ReduceScatter:
        @pl.function(type=pl.FunctionType.InCore)
        def step(self, x, y, data, signal):
            me = pld.rank(pld.get_comm_ctx(data))
            for c in pl.range(nr):
                data = pl.store(pl.load(x, [0, c * SIZE], [1, SIZE]), [c, 0], data)
            if builtin:
                data = pld.tensor.reduce_scatter(data, signal, op=pld.ReduceOp.Sum)
                return pl.store(pl.load(data, [me, 0], [1, SIZE]), [0, 0], y)
            for peer in pl.range(nr):
                if peer != me:
                    pld.system.notify(signal, peer=peer, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            for src in pl.range(nr):
                if src != me:
                    pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
            acc = pl.load(data, [me, 0], [1, SIZE])
            for peer in pl.range(nr):
                if peer != me:
                    acc = pl.add(acc, pld.tile.remote_load(data, peer=peer, offsets=[me, 0], shape=[1, SIZE]))
            return pl.store(acc, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, inputs, outputs):
            data_buf = pld.alloc_window_buffer(nr * SIZE * pl.FP32.get_byte())
            signal_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [nr, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.step(inputs[r], outputs[r], data, signal, device=r)
            return outputs

    return ReduceScatter


def main():
    parser = argparse.ArgumentParser(description="14_reduce_scatter")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1")
    parser.add_argument("--mode", default="hand", choices=["hand", "builtin"])
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    inputs = np.stack([np.arange(r * 100.0, r * 100.0 + n * SIZE, dtype=np.float32).reshape(1, n * SIZE) for r in range(n)])
    outputs = np.zeros((n, 1, SIZE), dtype=np.float32)
    compiled = ir.compile(build(n, args.mode == "builtin"), platform=args.platform,
                          distributed_config=DistributedConfig(device_ids=ids))
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(inputs, outputs)
    total = inputs.sum(axis=0).reshape(n, SIZE)
    want = total.reshape(n, 1, SIZE)
    assert np.allclose(outputs, want, rtol=1e-5, atol=1e-5), f"max diff {np.abs(outputs - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
