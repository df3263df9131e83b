"""Step 13 — all-gather: every rank ends with the rank-ordered
concatenation of every slice. ``--mode hand`` (default): stage into row
``my_rank`` of the ``[P, SIZE]`` window, a notify/wait barrier, pull row p
of every rank p. ``--mode builtin``: ``pld.tensor.allgather(x, data,
signal)`` (push-based), after which the window is the result.

    pld-pypto examples/13_allgather.py -p a2a3sim -d 0,1,2 --mode builtin
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
    class AllGather:
        @pl.function(type=pl.FunctionType.InCore)
        def step(self, x, y, data, signal):
            me = pld.rank(pld.get_comm_ctx(data))
            if builtin:
                data = pld.tensor.allgather(x, data, signal)
                for src in pl.range(nr):
                    y = pl.store(pl.load(data, [src, 0], [1, SIZE]), [0, src * SIZE], y)
                return y
            data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [me, 0], data)
            for peer in pl.range(nr):
                if peer != me:
                    pld.system.notify(signal, peer=peer, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            for src in pl.range(nr):
                if src != me:
                    pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
            for peer in pl.range(nr):
                recv = pld.tile.remote_load(data, peer=peer, offsets=[peer, 0], shape=[1, SIZE])
                y = pl.store(recv, [0, peer * SIZE], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, inputs, outputs):
            data_buf = pld.alloc_window_buffer(nr * SIZE * pl.FP32.get_byte())
            signal_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [nr, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.step(inputs[r], outputs[r], data, signal, device=r)
            return outputs

    return AllGather


def main():
    parser = argparse.ArgumentParser(description="13_allgather")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1")
    parser.add_argument("--mode", default="hand", choices=["hand", "builtin"])
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    inputs = np.stack([np.arange(r * 100.0, r * 100.0 + SIZE, dtype=np.float32).reshape(1, SIZE) for r in range(n)])
    outputs = np.zeros((n, 1, n * SIZE), dtype=np.float32)
    compiled = ir.compile(build(n, args.mode == "builtin"), platform=args.platform,
                          distributed_config=DistributedConfig(device_ids=ids))
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(inputs, outputs)
    want = np.stack([inputs.reshape(1, n * SIZE)] * n)
    assert np.allclose(outputs, want, rtol=1e-5, atol=1e-5), f"max diff {np.abs(outputs - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
