"""PyPTO's HOST builtins on pld: a collective called in the host
orchestrator on ``pld.window`` views runs on every rank in program order
(rank-1 signals; ``allreduce`` without a signal allocates a private
``[world_size, core_num]`` one); ``all_to_all_v`` in a kernel; L2
programs of several orchestration functions; SubWorker host steps."""

import textwrap

from conftest import assert_fails, assert_ok, run_program

HEAD = textwrap.dedent('''\
    import numpy as np
    import pypto.language as pl
    import pypto.language.distributed as pld
    from pypto import ir
    from pypto.ir.distributed_compiled_program import DistributedConfig


    def compile(p, n=2):
        return ir.compile(p, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=list(range(n))))


    @pl.program
    class P:
        @pl.function(type=pl.FunctionType.InCore)
        def publish(self, inp, data):
            return pl.store(pl.load(inp, [0, 0], [1, 64]), [0, 0], data)

        @pl.function(type=pl.FunctionType.InCore)
        def consume(self, data, out):
            return pl.store(pl.load(data, [0, 0], [1, 64]), [0, 0], out)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, inputs, outputs):
            n = pld.world_size()
            data_buf = pld.alloc_window_buffer(64 * pl.FP32.get_byte())
            signal_buf = pld.alloc_window_buffer(n * 4 * pl.INT32.get_byte())
            data = pld.window(data_buf, [1, 64], dtype=pl.FP32)
            for r in pl.range(n):
                self.publish(inputs[r], data, device=r)
    ''')

TAIL = textwrap.dedent('''\
            for r in pl.range(n):
                self.consume(data, outputs[r], device=r)
            return outputs


    x = np.arange(3 * 64, dtype=np.float32).reshape(3, 1, 64)
    y = np.zeros_like(x)
    compile(P, 3)(x, y)
    ''')


def host_program(call, check):
    body = textwrap.indent(textwrap.dedent(call), " " * 8)
    return HEAD + body + TAIL + textwrap.dedent(check) + 'print("OK")\n'


def ok(tmp_path, name, text):
    assert_ok(run_program(tmp_path, name, text))


def fails(tmp_path, name, text, message):
    assert_fails(run_program(tmp_path, name, text), message)


def test_host_allreduce_with_a_rank1_signal_reduces_on_every_rank(tmp_path):
    ok(tmp_path, "allreduce_rank1", host_program('''\
        signal = pld.window(signal_buf, [n], dtype=pl.INT32)
        data = pld.tensor.allreduce(data, signal, op=pld.ReduceOp.Max)
        ''', "assert (y == x.max(axis=0)).all(), y\n"))


def test_host_allreduce_without_a_signal_and_with_core_num(tmp_path):
    ok(tmp_path, "allreduce_synth", host_program('''\
        data = pld.tensor.allreduce(data, op=pld.ReduceOp.Sum, core_num=4)
        ''', "assert (y == x.sum(axis=0)).all(), y\n"))


def test_host_allreduce_reuses_its_signal_across_calls(tmp_path):
    ok(tmp_path, "allreduce_twice", host_program('''\
        signal = pld.window(signal_buf, [n, 4], dtype=pl.INT32)
        data = pld.tensor.allreduce(data, signal, core_num=2)
        data = pld.tensor.allreduce(data, signal, core_num=2)
        ''', "assert (y == 3 * x.sum(axis=0)).all(), y\n"))


def test_host_broadcast_and_barrier(tmp_path):
    ok(tmp_path, "broadcast", host_program('''\
        signal = pld.window(signal_buf, [n], dtype=pl.INT32)
        pld.tensor.barrier(signal)
        data = pld.tensor.broadcast(data, signal, root=2)
        ''', "assert (y == x[2]).all(), y\n"))


def test_core_num_needs_a_lane_per_core(tmp_path):
    fails(tmp_path, "lanes", host_program('''\
        signal = pld.window(signal_buf, [n, 1], dtype=pl.INT32)
        data = pld.tensor.allreduce(data, signal, core_num=2)
        ''', ""), "core_num=2: the signal [3, 1] needs a lane (column) per core")


def test_ring_mode_refuses_core_num(tmp_path):
    fails(tmp_path, "ring_cores", host_program('''\
        signal = pld.window(signal_buf, [n, 4], dtype=pl.INT32)
        data = pld.tensor.allreduce(data, signal, mode="ring", core_num=2)
        ''', ""), 'mode="ring" requires core_num=1')


def test_a_host_broadcast_root_outside_the_ranks_is_refused(tmp_path):
    fails(tmp_path, "bad_root", host_program('''\
        signal = pld.window(signal_buf, [n], dtype=pl.INT32)
        data = pld.tensor.broadcast(data, signal, root=3)
        ''', ""), "root=3 is not a rank of the 3 participating")


ALL_TO_ALL_V = '''\
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR, MR, W = 3, 2, 8


@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, inp, counts, out, recv_out, data, signal, recv):
        result = pld.tensor.all_to_all_v(inp, data, signal, counts, recv)
        for src in pl.range(NR):
            n = pl.read(recv, [src, 0])
            pl.write(recv_out, [src, 0], n)
            for r in pl.range(n):
                out[src * MR + r:src * MR + r + 1, 0:W] = result[src * MR + r:src * MR + r + 1, 0:W]

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, inputs, counts, outputs, recv_outputs):
        data_buf = pld.alloc_window_buffer(NR * MR * W * 4)
        signal_buf = pld.alloc_window_buffer(NR * 4)
        recv_buf = pld.alloc_window_buffer(NR * 4)
        for r in pl.range(pld.world_size()):
            self.k(inputs[r], counts[r], outputs[r], recv_outputs[r],
                   pld.window(data_buf, [NR * MR, W], dtype=pl.FP32),
                   pld.window(signal_buf, [NR, 1], dtype=pl.INT32),
                   pld.window(recv_buf, [NR, 1], dtype=pl.INT32), device=r)


x = np.arange(NR * NR * MR * W, dtype=np.float32).reshape(NR, NR * MR, W)
# Rank s sends (s + d) % 3 rows to rank d; 5 is clamped to MAX_RECV.
counts = np.array([[[(s + d) % 3] for d in range(NR)] for s in range(NR)], dtype=np.int32)
counts[0, 1, 0] = 5
y = np.zeros_like(x)
recv = np.zeros((NR, NR, 1), dtype=np.int32)
ir.compile(P, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0, 1, 2]))(x, counts, y, recv)
for d in range(NR):
    for s in range(NR):
        n = min(int(counts[s, d, 0]), MR)
        assert recv[d, s, 0] == n, (d, s, recv[d, s, 0], n)
        assert (y[d, s * MR:s * MR + n] == x[s, d * MR:d * MR + n]).all(), (d, s)
        assert not y[d, s * MR + n:(s + 1) * MR].any(), (d, s)
print("OK")
'''


def test_all_to_all_v_sends_the_counted_rows_and_publishes_the_counts(tmp_path):
    ok(tmp_path, "all_to_all_v", ALL_TO_ALL_V)


L2 = '''\
import numpy as np
import pypto.language as pl
from pypto import ir


@pl.program
class Two:
    @pl.function(type=pl.FunctionType.InCore)
    def k_add(self, a, b, f):
        return pl.store(pl.add(pl.load(a, [0, 0], [8, 64]), pl.load(b, [0, 0], [8, 64])), [0, 0], f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch_add(self, a, b, f):
        return self.k_add(a, b, f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch_twice(self, a, b, f):
        self.k_add(a, a, f)
        return f


compiled = ir.compile(Two, platform="a2a3sim")
a = np.full((8, 64), 2.0, dtype=np.float32)
b = np.full((8, 64), 3.0, dtype=np.float32)
f = np.zeros_like(a)
compiled["orch_add"](a, b, f)
assert (f == 5).all(), f
compiled["orch_twice"](a, b, f)
assert (f == 4).all(), f
try:
    compiled["orch_mul"]
except KeyError as e:
    assert "no orchestration function 'orch_mul'" in str(e), e
else:
    raise AssertionError("an unknown orchestration function was found")
print("OK")
'''


def test_an_l2_program_runs_each_orchestration_function_by_name(tmp_path):
    ok(tmp_path, "l2", L2)


SUBWORKER = '''\
import numpy as np
import pypto.language as pl
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

seen = []


@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a, f):
        return pl.store(pl.add(pl.load(a, [0, 0], [8, 64]), 1.0), [0, 0], f)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, a, f):
        return self.k(a, f)

    @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
    def verify(f):
        seen.append(float(f[0, 0]))

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, a, f):
        out = self.chip(a, f)
        self.verify(out)
        return out


a = np.full((8, 64), 4.0, dtype=np.float32)
f = np.zeros_like(a)
ir.compile(P, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0], num_sub_workers=1))(a, f)
assert seen == [5.0], seen
print("OK")
'''


def test_a_subworker_runs_after_the_chip_work_before_it(tmp_path):
    ok(tmp_path, "subworker", SUBWORKER)


TUPLE = '''\
import numpy as np
import pypto.language as pl
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig


@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a, b, s: pl.Out[pl.Tensor[[8, 64], pl.FP32]], d: pl.Out[pl.Tensor[[8, 64], pl.FP32]]):
        ta, tb = pl.load(a, [0, 0], [8, 64]), pl.load(b, [0, 0], [8, 64])
        return pl.store(pl.add(ta, tb), [0, 0], s), pl.store(pl.sub(ta, tb), [0, 0], d)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, a, b, s, d):
        got = self.k(a, b, s, d)
        assert got[0] is s and got[1] is d, got
        return got


a = np.full((8, 64), 5.0, dtype=np.float32)
b = np.full((8, 64), 3.0, dtype=np.float32)
s, d = np.zeros_like(a), np.zeros_like(a)
ir.compile(P, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0]))(a, b, s, d)
assert (s == 8).all() and (d == 2).all(), (s, d)
print("OK")
'''


def test_a_chip_call_from_the_host_returns_its_out_arguments(tmp_path):
    ok(tmp_path, "tuple_return", TUPLE)


PREPARED = '''\
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig


@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def bump(self, out, counter):
        # Each call adds 1 to the retained window cell and reports it.
        tile = pl.load(counter, [0, 0], [1, 8])
        pl.store(pl.add(tile, 1), [0, 0], counter)
        pl.write(out, [0, 0], pl.read(counter, [0, 0]))

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, outputs):
        buf = pld.alloc_window_buffer(8 * pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            self.bump(outputs[r], pld.window(buf, [1, 8], dtype=pl.INT32), device=r)


compiled = ir.compile(P, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0, 1]))
out = np.zeros((2, 1, 8), dtype=np.int32)
with compiled.prepare(persistent=True, reset_persistent_windows=False) as worker:
    for k in range(1, 4):
        worker(out)
        assert (out[:, 0, 0] == k).all(), (k, out[:, 0, 0])
with compiled.prepare(persistent=True) as worker:
    for _ in range(3):
        worker(out)
        assert (out[:, 0, 0] == 1).all(), out[:, 0, 0]
with compiled.prepare() as worker:
    worker(out)
    assert (out[:, 0, 0] == 1).all(), out[:, 0, 0]
print("OK")
'''


def test_a_prepared_persistent_program_keeps_its_windows_unless_reset(tmp_path):
    ok(tmp_path, "prepared", PREPARED)


def test_sub_worker_overrides_replace_a_sub_worker_and_unknown_names_are_refused(tmp_path):
    text = SUBWORKER.replace(
        'ir.compile(P, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0], num_sub_workers=1))(a, f)\nassert seen == [5.0], seen',
        '''compiled = ir.compile(P, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0]))
try:
    compiled.prepare(sub_worker_overrides={"nonexistent": print})
except ValueError as e:
    assert "['nonexistent'], which are not sub-workers of the program (those are ['verify'])" in str(e), e
else:
    raise AssertionError("an unknown sub-worker was accepted")
with compiled.prepare(sub_worker_overrides={"verify": lambda args: seen.append(("override", float(args[0][0, 0])))}) as w:
    w(a, f)
assert seen == [("override", 5.0)], seen''')
    assert "sub_worker_overrides" in text
    ok(tmp_path, "overrides", text)
