"""The compiled program's calling conventions and its prepared worker, as
PyPTO publishes them: a call with only the inputs allocates and returns
the ``pl.Out`` tensors; ``compiled.prepare()`` / ``DistributedWorker``
with resident tensors (``alloc_tensor``, ``alloc_stacked_tensor``),
``register`` / ``run`` / ``submit`` and ``close``; and comm groups (a
window buffer dispatched to a subset of the ranks addresses its peers by
their place in that subset). Each program checks itself and prints OK."""

import textwrap

from conftest import assert_fails, assert_ok, run_program

HEAD = textwrap.dedent('''\
    import numpy as np
    import pypto.language as pl
    import pypto.language.distributed as pld
    from pypto import ir
    from pypto.ir.distributed_compiled_program import DistributedCompiledProgram, DistributedConfig
    from pypto.runtime import DistributedWorker, StackedDeviceTensor


    @pl.program
    class Add:
        @pl.function(type=pl.FunctionType.InCore)
        def add(self, a: pl.Tensor[[1, 64], pl.FP32], b: pl.Tensor[[1, 64], pl.FP32],
                f: pl.Out[pl.Tensor[[1, 64], pl.FP32]]) -> pl.Tensor[[1, 64], pl.FP32]:
            return pl.store(pl.add(pl.load(a, [0, 0], [1, 64]), pl.load(b, [0, 0], [1, 64])), [0, 0], f)

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, a: pl.Tensor[[1, 64], pl.FP32], b: pl.Tensor[[1, 64], pl.FP32],
                 f: pl.Out[pl.Tensor[[1, 64], pl.FP32]]) -> pl.Tensor[[1, 64], pl.FP32]:
            return self.add(a, b, f)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, a: pl.Tensor[[2, 1, 64], pl.FP32], b: pl.Tensor[[2, 1, 64], pl.FP32],
                 f: pl.Out[pl.Tensor[[2, 1, 64], pl.FP32]]) -> pl.Tensor[[2, 1, 64], pl.FP32]:
            for r in pl.range(2):
                self.chip(a[r], b[r], f[r], device=r)
            return f


    compiled = ir.compile(Add, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0, 1]))
    a = np.full((2, 1, 64), 2.0, dtype=np.float32)
    b = np.full((2, 1, 64), 3.0, dtype=np.float32)
    ''')


def test_a_call_with_only_the_inputs_allocates_and_returns_the_outputs(tmp_path):
    r = run_program(tmp_path, "ret", HEAD + textwrap.dedent('''\
        assert isinstance(compiled, DistributedCompiledProgram)
        f = compiled(a, b)
        assert isinstance(f, np.ndarray) and f.dtype == np.float32 and f.shape == (2, 1, 64), f
        assert (f == 5.0).all(), f
        g = np.zeros_like(a)
        assert compiled(a, b, g) is None and (g == 5.0).all()
        print("OK")
        '''))
    assert_ok(r)


def test_a_call_with_a_wrong_argument_count_names_both_conventions(tmp_path):
    r = run_program(tmp_path, "count", HEAD + "compiled(a)\n")
    assert_fails(r, "host expects 3 (in place) or 2 (return) arguments, got 1")


def test_a_resident_tensor_is_a_copy_made_at_upload_and_close_frees_it(tmp_path):
    r = run_program(tmp_path, "resident", HEAD + textwrap.dedent('''\
        f = np.zeros_like(a)
        rt = compiled.prepare()
        weight = rt.alloc_tensor((2, 1, 64), np.float32, init=b)
        b[...] = 100.0  # after the upload: the resident copy keeps 3.0
        assert len(rt._owned_tensors) == 1
        handle = rt.register(compiled)
        assert handle.compiled is compiled
        handle(a, weight, f)
        assert (f == 5.0).all(), f
        f[...] = 0
        rt.run(compiled, a, weight, f)
        assert (f == 5.0).all(), f
        f[...] = 0
        assert rt.submit(compiled, a, weight, f).result() is None and (f == 5.0).all()
        rt.close()
        assert len(rt._owned_tensors) == 0 and handle.closed
        try:
            rt.register(compiled)
        except RuntimeError as e:
            assert "called after close" in str(e), e
        else:
            raise AssertionError("register after close ran")
        print("OK")
        '''))
    assert_ok(r)


def test_a_stacked_tensor_gives_each_dispatch_its_shard(tmp_path):
    r = run_program(tmp_path, "stacked", HEAD + textwrap.dedent('''\
        f = np.zeros_like(a)
        stack = np.stack([np.full((1, 64), 10.0 + i, dtype=np.float32) for i in range(2)])
        with compiled.prepare() as rt:
            weight = rt.alloc_stacked_tensor(stack, worker_ids=[1, 0])
            assert isinstance(weight, StackedDeviceTensor) and weight.worker_ids == (1, 0)
            stack[...] = 0
            rt(a, weight, f)
            assert (f[0] == 12.0).all() and (f[1] == 13.0).all(), f
            back = np.zeros_like(stack)
            rt.copy_stacked_from(weight, back)
            assert (back[0] == 10.0).all() and (back[1] == 11.0).all(), back
            rt.free_stacked_tensor(weight)
            assert not rt._owned_tensors
        print("OK")
        '''))
    assert_ok(r)


def test_a_worker_of_two_programs_refuses_an_unnamed_call(tmp_path):
    r = run_program(tmp_path, "two", HEAD + textwrap.dedent('''\
        other = ir.compile(Add, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0, 1]))
        with DistributedWorker([compiled, other]) as rt:
            f = np.zeros_like(a)
            rt.run(other, a, b, f)
            assert (f == 5.0).all()
            rt(a, b, f)
        '''))
    assert_fails(r, "rt(*args) is ambiguous: this worker prepared 2 programs")


GROUPS = textwrap.dedent('''\
    import numpy as np
    import pypto.language as pl
    import pypto.language.distributed as pld
    from pypto import ir
    from pypto.ir.distributed_compiled_program import DistributedConfig


    @pl.program
    class Groups:
        @pl.function(type=pl.FunctionType.InCore)
        def swap(self, inp: pl.Tensor[[1, 64], pl.FP32], out: pl.Out[pl.Tensor[[1, 64], pl.FP32]],
                 scratch: pl.InOut[pld.DistributedTensor[[1, 64], pl.FP32]],
                 signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                 peer: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 64], pl.FP32]:
            assert pld.world_size() == 2, pld.world_size()
            pl.store(pl.load(inp, [0, 0], [1, 64]), [0, 0], scratch)
            pld.system.notify(signal, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            pld.system.wait(signal=signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
            got = pld.tile.remote_load(scratch, peer=peer, offsets=[0, 0], shape=[1, 64])
            return pl.store(got, [0, 0], out)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[3, 1, 64], pl.FP32], ya: pl.Out[pl.Tensor[[3, 1, 64], pl.FP32]],
                 yb: pl.Out[pl.Tensor[[3, 1, 64], pl.FP32]]):
            scratch_a, signal_a = pld.alloc_window_buffer(256), pld.alloc_window_buffer(4)
            scratch_b, signal_b = pld.alloc_window_buffer(256), pld.alloc_window_buffer(4)
            for r in pl.range(2):  # group {0, 1}
                self.swap(x[r], ya[r], pld.window(scratch_a, [1, 64], dtype=pl.FP32),
                          pld.window(signal_a, [1, 1], dtype=pl.INT32), PEER_A, device=r)
            for r in pl.range(1, 3):  # group {1, 2}: rank 1 is its peer 0, rank 2 its peer 1
                self.swap(x[r], yb[r], pld.window(scratch_b, [1, 64], dtype=pl.FP32),
                          pld.window(signal_b, [1, 1], dtype=pl.INT32), 2 - r, device=r)


    compiled = ir.compile(Groups, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0, 1, 2]))
    x = np.stack([np.full((1, 64), 10.0 + r, dtype=np.float32) for r in range(3)])
    ya, yb = np.zeros_like(x), np.zeros_like(x)
    compiled(x, ya, yb)
    assert (ya[0] == 11).all() and (ya[1] == 10).all() and (ya[2] == 0).all(), ya
    assert (yb[1] == 12).all() and (yb[2] == 11).all() and (yb[0] == 0).all(), yb
    print("OK")
    ''')


def test_a_buffer_dispatched_to_some_ranks_numbers_its_peers_within_them(tmp_path):
    assert_ok(run_program(tmp_path, "groups", GROUPS.replace("PEER_A", "1 - r"), "-d", "0,1,2"))


def test_a_peer_outside_the_comm_group_is_refused_naming_the_group(tmp_path):
    r = run_program(tmp_path, "outside", GROUPS.replace("PEER_A", "2"), "-d", "0,1,2")
    assert_fails(r, "peer 2 is not in this dispatch's comm group: its window buffers are dispatched to ranks [0, 1]")
