"""PyPTO's language as its published signatures give it, run eagerly:
loops with loop-carried values (``pl.range(..., init_values=...)`` and
``pl.yield_``), ``pl.parallel`` / ``pl.unroll`` / ``pl.pipeline``,
``pl.cast(x, target_type=...)``, ``pl.load(..., valid_shape=...)``. Each
program checks its own results and prints OK."""

import textwrap

import pytest

from conftest import assert_fails, assert_ok, run_program

HEAD = textwrap.dedent('''\
    import numpy as np
    import pypto.language as pl
    import pypto.language.distributed as pld
    from pypto import ir
    from pypto.ir.distributed_compiled_program import DistributedConfig

    ''')

TAIL = textwrap.dedent('''\

    compiled = ir.compile(P, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0, 1]))
    x = np.arange(2 * 64, dtype=np.float32).reshape(2, 1, 64)
    y = np.zeros_like(x)
    compiled(x, y)
    check(x, y)
    print("OK")
    ''')


def program(kernel_body, check_body):
    """A 2-rank program whose kernel is ``kernel_body`` (over ``inp``,
    ``out`` and the rank's window view ``win`` of [1, 64] fp32) and whose
    golden is ``check_body`` (over the host arrays ``x``, ``y``)."""
    kernel = textwrap.indent(textwrap.dedent(kernel_body), " " * 8)
    check = textwrap.indent(textwrap.dedent(check_body), " " * 4)
    return HEAD + textwrap.dedent('''\
        @pl.program
        class P:
            @pl.function(type=pl.FunctionType.InCore)
            def k(self, inp, out, win):
        ''') + kernel + textwrap.dedent('''\

            @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
            def host(self, inputs, outputs):
                buf = pld.alloc_window_buffer(64 * pl.FP32.get_byte())
                for r in pl.range(pld.world_size()):
                    self.k(inputs[r], outputs[r], pld.window(buf, [1, 64], dtype=pl.FP32), device=r)
                return outputs


        def check(x, y):
        ''') + check + TAIL


CASES = {
    # Iteration k + 1 sees what iteration k yielded; after the loop the
    # name bound to pl.yield_ holds the last value.
    "range_carries_values_through_yield": ('''\
        for i, (acc,) in pl.range(0, 4, 1, init_values=(0,)):
            total = pl.yield_(acc + i)
        tile = pl.load(inp, [0, 0], [1, 64])
        pl.store(pl.add(tile, total), [0, 0], out)
        ''', "assert np.array_equal(y, x + 6), y"),
    "two_carried_values_and_a_step": ('''\
        for i, (a, b) in pl.range(1, 10, 3, init_values=(0, 1)):
            a2, b2 = pl.yield_(a + i, b * i)
        pl.store(pl.add(pl.load(inp, [0, 0], [1, 64]), a2 * 1000 + b2), [0, 0], out)
        ''', "assert np.array_equal(y, x + (1 + 4 + 7) * 1000 + 1 * 4 * 7), y"),
    # The carried value is a window view rebound by pl.store (in place).
    "a_carried_window_view_chunked_with_valid_shape": ('''\
        for col, (w,) in pl.range(0, 64, 24, init_values=(win,)):
            valid = pl.min(24, 64 - col)
            chunk = pl.load(inp, [0, col], [1, 32], valid_shape=[1, valid])
            w = pl.store(chunk, [0, col], w)
            staged = pl.yield_(w)
        pl.store(pl.load(staged, [0, 0], [1, 64]), [0, 0], out)
        ''', "assert np.array_equal(y, x), y"),
    "parallel_unroll_and_pipeline_run_every_iteration": ('''\
        n = 0
        for i in pl.parallel(4):
            n += 1
        for i in pl.unroll(0, 6, 2):
            n += 10
        for i, (m,) in pl.pipeline(8, stage=2, init_values=(0,)):
            m2 = pl.yield_(m + 100)
        pl.store(pl.add(pl.load(inp, [0, 0], [1, 64]), n + m2), [0, 0], out)
        ''', "assert np.array_equal(y, x + 4 + 30 + 800), y"),
    "cast_takes_target_type_by_keyword": ('''\
        me = pl.cast(pld.rank(pld.get_comm_ctx(win)), target_type=pl.FP32)
        t = pl.cast(pl.load(inp, [0, 0], [1, 64]), target_type=pl.INT32)
        back = pl.cast(t, pl.FP32, mode="round")
        pl.store(pl.add(back, me), [0, 0], out)
        ''', "assert np.array_equal(y, x + np.arange(2, dtype=np.float32).reshape(2, 1, 1)), y"),
    "a_window_load_with_valid_shape_pads_the_tile": ('''\
        pl.store(pl.load(inp, [0, 0], [1, 64]), [0, 0], win)
        part = pl.load(win, [0, 8], [1, 32], valid_shape=[1, 16])
        assert part.shape == [1, 32] and part.valid_shape == [1, 16], (part.shape, part.valid_shape)
        pl.store(part, [0, 8], out)
        ''', "assert np.array_equal(y[:, :, 8:24], x[:, :, 8:24]) and not y[:, :, 24:].any(), y"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_language(tmp_path, case):
    kernel, check = CASES[case]
    assert_ok(run_program(tmp_path, case, program(kernel, check)))


def test_yield_with_the_wrong_number_of_values_names_both(tmp_path):
    bad = program('''\
        for i, (a, b) in pl.range(2, init_values=(0, 1)):
            a2 = pl.yield_(a)
        ''', "pass")
    assert_fails(run_program(tmp_path, "bad_yield", bad),
                 "pl.yield_ gives 1 value(s) to a range() loop that carries 2 (init_values)")


def test_a_load_whose_valid_part_overflows_the_tile_is_refused(tmp_path):
    bad = program("pl.load(inp, [0, 0], [1, 32], valid_shape=[1, 40])\n", "pass")
    assert_fails(run_program(tmp_path, "bad_valid", bad), "valid_shape [1, 40] does not fit in the tile's shape [1, 32]")
