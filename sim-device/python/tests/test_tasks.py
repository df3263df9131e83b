"""Deferred completion: a ``pl.at`` task whose deps registered
``pld.system.defer_wait`` runs once the condition holds, so a task
submitted after it (the publisher the condition waits for) is not held up
by it — run in program order with a blocking wait, each rank would wait
for a peer that waits for it."""

import textwrap

import pytest

from conftest import assert_fails, assert_ok, run_program

PROGRAM = textwrap.dedent('''\
    import numpy as np
    import pypto.language as pl
    import pypto.language.distributed as pld
    from pypto import ir
    from pypto.ir.distributed_compiled_program import DistributedConfig


    @pl.program
    class Deferred:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, inp: pl.Tensor[[1, 8], pl.INT32], out: pl.Out[pl.Tensor[[4, 8], pl.INT32]],
                 payload: pl.InOut[pld.DistributedTensor[[1, 8], pl.INT32]],
                 signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]], peer: pl.Scalar[pl.INT32]):
            with pl.manual_scope():
                for slot in pl.range(4):
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="waiter") as wait_tid:
                        pld.system.defer_wait(signal=signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
                    with pl.at(level=pl.Level.CORE_GROUP, deps=[wait_tid]):
                        got = pl.load(payload, [0, 0], [1, 8])
                        out = pl.store(got, [slot, 0], out)
                    CONSUMER_TAIL
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="publisher"):
                    pld.tile.remote_store(pl.load(inp, [0, 0], [1, 8]), target=payload, peer=peer, offsets=[0, 0])
                    pld.system.notify(target=signal, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
            return out

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[2, 1, 8], pl.INT32], y: pl.Out[pl.Tensor[[2, 4, 8], pl.INT32]]):
            payload_buf, signal_buf = pld.alloc_window_buffer(32), pld.alloc_window_buffer(4)
            for r in pl.range(2):
                self.chip(x[r], y[r], pld.window(payload_buf, [1, 8], dtype=pl.INT32),
                          pld.window(signal_buf, [1, 1], dtype=pl.INT32), 1 - r, device=r)


    compiled = ir.compile(Deferred, platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0, 1]))
    x = np.stack([np.full((1, 8), r + 1, dtype=np.int32) for r in range(2)])
    y = np.zeros((2, 4, 8), dtype=np.int32)
    compiled(x, y)
    assert (y[0] == 2).all() and (y[1] == 1).all(), y
    print("OK")
    ''')


@pytest.mark.parametrize("checked", [[], ["--checked"]], ids=["plain", "checked"])
def test_a_task_deferred_on_a_wait_runs_after_the_publisher_submitted_later(tmp_path, checked):
    assert_ok(run_program(tmp_path, "deferred", PROGRAM.replace("CONSUMER_TAIL", "pass"), *checked))


def test_a_deferred_tasks_value_used_outside_it_before_it_ran_is_refused(tmp_path):
    r = run_program(tmp_path, "early", PROGRAM.replace("CONSUMER_TAIL", "pl.store(got, [slot, 0], out)"))
    assert_fails(r, "pl.load in a deferred task (it runs once the defer_wait it depends on holds) "
                    "is used outside that task before it ran")
