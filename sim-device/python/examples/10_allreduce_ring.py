"""Step 10 — all-reduce v3 (ring): a chunked reduce-scatter then
all-gather, each rank only ever reading its left neighbour, on a
``[2(P-1), P]`` signal (one row per round): notify the right neighbour
after a store, wait on the left one before a ``remote_load``.

One addition to the tutorial's schedule: two acknowledgements. In the
all-gather a rank overwrites chunks its right neighbour reads in the
reduce-scatter; at P >= 3 a fast rank could do so before a slow neighbour
has read them. Each rank tells its left neighbour when it is done reading
it (cell ``[0, left]``, then ``[1, left]``: the neighbour's own column,
which no ready signal uses) and waits for its right neighbour's word
before overwriting and before returning. SIZE must split into P chunks.

    pld-pypto examples/10_allreduce_ring.py -p a2a3sim -d 0,1,2,3
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64
ADD = pld.NotifyOp.AtomicAdd
GE = pld.WaitCmp.Ge


def build(nr):
    if SIZE % nr != 0:
        raise ValueError(f"SIZE={SIZE} must split into the rank count: run with P = 2, 4 or 8 ranks, not {nr}")
    chunk, rounds = SIZE // nr, 2 * (nr - 1)

    @pl.program
    class Ring:
        @pl.function(type=pl.FunctionType.InCore)
        def ring_step(self, x, y, scratch, signal):
            ctx = pld.get_comm_ctx(scratch)
            me, n = pld.rank(ctx), pld.nranks(ctx)
            left, right = (me - 1 + n) % n, (me + 1) % n
            for c in pl.range(n):
                scratch = pl.store(pl.load(x, [0, c * chunk], [1, chunk]), [0, c * chunk], scratch)
            pld.system.notify(signal, peer=right, offsets=[0, me], value=1, op=ADD)
            for s in pl.range(n - 1):
                pld.system.wait(signal, offsets=[s, left], expected=1, cmp=GE)
                idx = (me - s - 2 + 2 * n) % n
                recv = pld.tile.remote_load(scratch, peer=left, offsets=[0, idx * chunk], shape=[1, chunk])
                acc = pl.add(pl.load(scratch, [0, idx * chunk], [1, chunk]), recv)
                scratch = pl.store(acc, [0, idx * chunk], scratch)
                pld.system.notify(signal, peer=right, offsets=[s + 1, me], value=1, op=ADD)
            pld.system.notify(signal, peer=left, offsets=[0, left], value=1, op=ADD)
            pld.system.wait(signal, offsets=[0, me], expected=1, cmp=GE)
            for s in pl.range(n - 1):
                pld.system.wait(signal, offsets=[n - 1 + s, left], expected=1, cmp=GE)
                idx = (me - s - 1 + n) % n
                recv = pld.tile.remote_load(scratch, peer=left, offsets=[0, idx * chunk], shape=[1, chunk])
                scratch = pl.store(recv, [0, idx * chunk], scratch)
                if s < n - 2:
                    pld.system.notify(signal, peer=right, offsets=[n + s, me], value=1, op=ADD)
            pld.system.notify(signal, peer=left, offsets=[1, left], value=1, op=ADD)
            pld.system.wait(signal, offsets=[1, me], expected=1, cmp=GE)
            for c in pl.range(n):
                y = pl.store(pl.load(scratch, [0, c * chunk], [1, chunk]), [0, c * chunk], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def ring_allreduce(self, x, y):
            scratch_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([rounds, nr], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                scratch = pld.window(scratch_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [rounds, nr], dtype=pl.INT32)
                self.ring_step(x[r], y[r], scratch, signal, device=r)
            return y

    return Ring


def main():
    parser = argparse.ArgumentParser(description="10_allreduce_ring")
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
    x = np.random.default_rng(10).standard_normal((n, 1, SIZE)).astype(np.float32)
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
