"""Step 04 — signals only: an N-rank barrier built from notify/wait.

Hand-rolled (default): each rank owns row ``my_rank`` of every peer's
``[N, 1]`` signal — it AtomicAdds 1 there on every peer, then waits (Ge 1)
on every peer's row of its own signal — and surfaces its signal rows, which
read 1 everywhere but its own row. ``--use-builtin``: ``pld.tensor.barrier``
orders a ``remote_load`` of the next rank's staged slice:
``y[r] = x[(r + 1) % N]``.

    pld-pypto examples/04_barrier.py -p a2a3sim -d 0,1 [--use-builtin]
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

SIZE = 64


def build(n, use_builtin):
    @pl.jit.incore
    def hand(y, signal):
        me = pld.rank(pld.get_comm_ctx(signal))
        for peer in pl.range(n):
            if peer != me:
                pld.system.notify(signal, peer=peer, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        for src in pl.range(n):
            if src != me:
                pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
        for i in pl.range(n):
            pl.write(y, [i, 0], pl.read(signal, [i, 0]))
        return y

    @pl.jit.incore
    def builtin(x, y, data, signal):
        ctx = pld.get_comm_ctx(data)
        me, nr = pld.rank(ctx), pld.nranks(ctx)
        data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)
        signal = pld.tensor.barrier(signal)
        recv = pld.tile.remote_load(data, peer=(me + 1) % nr, offsets=[0, 0], shape=[1, SIZE])
        y = pl.store(recv, [0, 0], y)
        # The same signal again: nobody leaves while a peer still reads it.
        signal = pld.tensor.barrier(signal)
        return y

    @pl.jit.host
    def program_hand(y):
        signal_buf = pld.alloc_window_buffer([n, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            hand(y[r], pld.window(signal_buf, [n, 1], dtype=pl.INT32), device=r)

    @pl.jit.host
    def program_builtin(x, y):
        data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([n, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [n, 1], dtype=pl.INT32)
            builtin(x[r], y[r], data, signal, device=r)

    return program_builtin if use_builtin else program_hand


def main():
    parser = argparse.ArgumentParser(description="04_barrier")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids, any count >= 2")
    parser.add_argument("--use-builtin", action="store_true")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    config = RunConfig(platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    program = build(n, args.use_builtin)
    if args.use_builtin:
        x = np.random.default_rng(4).standard_normal((n, 1, SIZE)).astype(np.float32)
        y = np.zeros_like(x)
        operands = (x, y)
    else:
        y = np.zeros((n, n, 1), dtype=np.int32)
        operands = (y,)
    compiled = program.compile(*operands, config=config)
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(*operands, config=config)
    if args.use_builtin:
        want = np.stack([x[(r + 1) % n] for r in range(n)])
        assert np.allclose(y, want, rtol=1e-5, atol=1e-5), f"max diff {np.abs(y - want).max()}"
    else:
        want = np.array([[[0 if i == r else 1] for i in range(n)] for r in range(n)], dtype=np.int32)
        assert np.array_equal(y, want), f"got {y.tolist()}, want {want.tolist()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
