"""Step 09 — all-reduce v2 (two-phase): reduce-scatter (rank r reduces
chunk r into its ``result``), then all-gather (every rank reads every
reduced chunk), with two notify/wait barriers on a ``[2, P]`` signal.
SIZE must split into P chunks (P = 2, 4, 8).

    pld-pypto examples/09_allreduce_two_phase.py -p a2a3sim -d 0,1,2,3
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


def build(nr):
    if SIZE % nr != 0:
        raise ValueError(f"SIZE={SIZE} must split into the rank count: run with P = 2, 4 or 8 ranks, not {nr}")
    chunk = SIZE // nr

    def barrier_row(signal, me, row):
        for peer in pl.range(nr):
            if peer != me:
                pld.system.notify(signal, peer=peer, offsets=[row, me], value=1, op=pld.NotifyOp.AtomicAdd)
        for src in pl.range(nr):
            if src != me:
                pld.system.wait(signal, offsets=[row, src], expected=1, cmp=pld.WaitCmp.Ge)

    @pl.program
    class TwoPhase:
        @pl.function(type=pl.FunctionType.InCore)
        def reduce_step(self, x, y, data, result, signal):
            me = pld.rank(pld.get_comm_ctx(data))
            data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
            barrier_row(signal, me, 0)
            acc = pl.load(data, [0, me * chunk], [1, chunk])
            for peer in pl.range(nr):
                if peer != me:
                    acc = pl.add(acc, pld.tile.remote_load(data, peer=peer, offsets=[0, me * chunk], shape=[1, chunk]))
            result = pl.store(acc, [0, me * chunk], result)
            barrier_row(signal, me, 1)
            for c in pl.range(nr):
                recv = pld.tile.remote_load(result, peer=c, offsets=[0, c * chunk], shape=[1, chunk])
                y = pl.store(recv, [0, c * chunk], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def two_phase(self, x, y):
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            result_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([2, nr], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                result = pld.window(result_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [2, nr], dtype=pl.INT32)
                self.reduce_step(x[r], y[r], data, result, signal, device=r)
            return y

    return TwoPhase


def main():
    parser = argparse.ArgumentParser(description="09_allreduce_two_phase")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1,2,3")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    try:
        program = build(n)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    x = np.random.default_rng(9).standard_normal((n, 1, SIZE)).astype(np.float32)
    y = np.zeros_like(x)
    compiled = ir.compile(program, platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
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
