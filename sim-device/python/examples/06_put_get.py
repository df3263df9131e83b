"""Step 06 — tensor-level put / get, push vs pull.

``--mode put`` (default): stage into ``src``, ``pld.tensor.put`` it into
the next rank's ``dst``, notify that rank, wait for the rank that targets
us, read our ``dst``: ``y[r] = x[(r - 1) % N]``. ``--mode get``: stage,
notify, wait, ``pld.tensor.get`` the next rank's ``src`` into our ``dst``:
``y[r] = x[(r + 1) % N]``. Any P.

    pld-pypto examples/06_put_get.py -p a2a3sim -d 0,1 --mode get
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

SIZE = 64




@pl.jit.incore
def put_step(x, y, src, dst, signal):
    ctx = pld.get_comm_ctx(src)
    peer = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    src = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], src)
    pld.tensor.put(dst, peer=peer, src=src, atomic=pld.AtomicType.None_)
    pld.system.notify(signal, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    return pl.store(pl.load(dst, [0, 0], [1, SIZE]), [0, 0], y)


@pl.jit.incore
def get_step(x, y, src, dst, signal):
    ctx = pld.get_comm_ctx(src)
    me, n = pld.rank(ctx), pld.nranks(ctx)
    src = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], src)
    # Tell the rank that reads us that we are staged; wait for our source.
    pld.system.notify(signal, peer=(me - 1) % n, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    pld.tensor.get(dst, peer=(me + 1) % n, src=src)
    return pl.store(pl.load(dst, [0, 0], [1, SIZE]), [0, 0], y)


def build(step):
    @pl.jit.host
    def ring(x, y):
        src_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        dst_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            src = pld.window(src_buf, [1, SIZE], dtype=pl.FP32)
            dst = pld.window(dst_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
            step(x[r], y[r], src, dst, signal, device=r)

    return ring


def main():
    parser = argparse.ArgumentParser(description="06_put_get")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids, any count >= 2")
    parser.add_argument("--mode", default="put", choices=["put", "get"])
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    x = np.random.default_rng(6).standard_normal((n, 1, SIZE)).astype(np.float32)
    y = np.zeros_like(x)
    config = RunConfig(platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    compiled = build(get_step if args.mode == "get" else put_step).compile(x, y, config=config)
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(x, y, config=config)
    shift = 1 if args.mode == "get" else -1
    want = np.stack([x[(r + shift) % n] for r in range(n)])
    assert np.allclose(y, want, rtol=1e-5, atol=1e-5), f"max diff {np.abs(y - want).max()}"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
