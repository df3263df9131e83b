"""Step 16 — putting it together, as the tutorial composes it: broadcast
root's weights, all-reduce (mesh) the per-rank slices, all-gather the
per-rank slices, then scale the gathered rows by the broadcast weights on
chip — one signal per collective. Goldens: ``allred[r] = sum_k x[k]`` and
``gathered[r] = concat_k(x[k] * w)``.

    pld-pypto examples/16_putting_it_together.py -p a2a3sim -d 0,1,2,3
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64
ROOT = 0


def build(nr):
    @pl.program
    class Together:
        @pl.function(type=pl.FunctionType.InCore)
        def compose(self, x, w_in, allred, gathered, w_data, ar_data, ag_data, sig_bcast, sig_ar, sig_ag):
            me = pld.rank(pld.get_comm_ctx(w_data))
            if me == ROOT:
                w_data = pl.store(pl.load(w_in, [0, 0], [1, SIZE]), [0, 0], w_data)
            w_data = pld.tensor.broadcast(w_data, sig_bcast, root=ROOT)
            w = pl.load(w_data, [0, 0], [1, SIZE])
            ar_data = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], ar_data)
            ar_data = pld.tensor.allreduce(ar_data, sig_ar, op=pld.ReduceOp.Sum, mode="mesh")
            allred = pl.store(pl.load(ar_data, [0, 0], [1, SIZE]), [0, 0], allred)
            ag_data = pld.tensor.allgather(x, ag_data, sig_ag)
            for src in pl.range(nr):
                chunk = pl.mul(pl.load(ag_data, [src, 0], [1, SIZE]), w)
                gathered = pl.store(chunk, [0, src * SIZE], gathered)
            return gathered

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, inputs, weights, allred_out, gathered_out):
            w_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            ar_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            ag_buf = pld.alloc_window_buffer([nr, SIZE], dtype=pl.FP32)
            sig_bufs = [pld.alloc_window_buffer([nr, 1], dtype=pl.INT32) for _ in range(3)]
            for r in pl.range(pld.world_size()):
                views = [
                    pld.window(w_buf, [1, SIZE], dtype=pl.FP32),
                    pld.window(ar_buf, [1, SIZE], dtype=pl.FP32),
                    pld.window(ag_buf, [nr, SIZE], dtype=pl.FP32),
                ] + [pld.window(b, [nr, 1], dtype=pl.INT32) for b in sig_bufs]
                self.compose(inputs[r], weights, allred_out[r], gathered_out[r], *views, device=r)
            return gathered_out

    return Together


def main():
    parser = argparse.ArgumentParser(description="16_putting_it_together")
    parser.add_argument("-p", "--platform", default="a2a3sim", choices=["a2a3sim", "a5sim"])
    parser.add_argument("-d", "--device", default="0,1")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    ids = [int(d) for d in args.device.split(",")]
    n = len(ids)
    inputs = np.stack([np.arange(r * 100.0, r * 100.0 + SIZE, dtype=np.float32).reshape(1, SIZE) for r in range(n)])
    weights = np.arange(1.0, 1.0 + SIZE, dtype=np.float32).reshape(1, SIZE)
    allred_out = np.zeros((n, 1, SIZE), dtype=np.float32)
    gathered_out = np.zeros((n, 1, n * SIZE), dtype=np.float32)
    compiled = ir.compile(build(n), platform=args.platform, distributed_config=DistributedConfig(device_ids=ids))
    if args.compile_only:
        print(f"compile_only done: {compiled.output_dir}")
        return 0
    compiled(inputs, weights, allred_out, gathered_out)
    want_allred = np.stack([inputs.sum(axis=0)] * n)
    want_gathered = np.stack([np.concatenate([inputs[k] * weights for k in range(n)], axis=1)] * n)
    assert np.allclose(allred_out, want_allred, rtol=1e-5, atol=1e-5), "allreduce mismatch"
    assert np.allclose(gathered_out, want_gathered, rtol=1e-5, atol=1e-5), "allgather mismatch"
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
