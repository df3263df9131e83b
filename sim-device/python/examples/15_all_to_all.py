"""Step 15 — all-to-all: row j of rank r's ``[P, SIZE]`` input goes to
rank j, and rank r ends with row r of every rank's input, stacked by
sender. ``--mode hand`` (default): ``remote_store`` each row into row
``my_rank`` of its rank's window, then a notify/wait barrier.
``--mode builtin``: ``pld.tensor.all_to_all(x, data, signal)``.

    pld-pypto examples/15_all_to_all.py -p a2a3sim -d 0,1,2 --mode builtin
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
    class AllToAll:
        @pl.function(type=pl.FunctionType.InCore)
        def step(self, x, y, data, signal):
            me = pld.rank(pld.get_comm_ctx(data))
            if builtin:
                data = pld.tensor.all_to_all(x, data, signal)
            else:
                for j in pl.range(nr):
                    pld.tile.remote_store(pl.load(x, [j, 0], [1, SIZE]), data, peer=j, offsets=[me, 0])
                for peer in pl.range(nr):
                    if peer != me:
                        pld.system.notify(signal, peer=peer, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
                for src in pl.range(nr):
                    if src != me:
                        pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
            for src in pl.range(nr):
                y = pl.store(pl.load(data, [src, 0], [1, SIZE]), [src, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, inputs, outputs):
            data_buf = pld.alloc_window_buffer([nr, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [nr, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.step(inputs[r], outputs[r], data, signal, device=r)
            return outputs

    return AllToAll


def main():
    parser = argparse.ArgumentParser(description="15_all_to_all")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1")
    parser.add_argument("--mode", default="hand", choices=["hand", "builtin"])
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    inputs = np.random.default_rng(15).standard_normal((n, n, SIZE)).astype(np.float32)
    outputs = np.zeros_like(inputs)
    compiled = ir.compile(build(n, args.mode == "builtin"), platform=args.platform,
                          distributed_config=DistributedConfig(device_ids=ids))
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(inputs, outputs)
    want = inputs.transpose(1, 0, 2)
    assert np.array_equal(outputs, want), f"max diff {np.abs(outputs - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
