"""Each device diagnostic through pld-pypto: the Rust device's check and
message, reaching the Python program as an error that names the rank and
the program's line; a failed rank never leaves the others waiting until
their deadline."""

import textwrap
import time

import pytest

from conftest import run

PROGRAM = '''\
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

N = 2


@pl.jit.incore
def kernel(x, y, data, signal):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
{body}


@pl.jit.host
def host(x, y):
    data_buf = pld.alloc_window_buffer([64, 64], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([N, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        data = pld.window(data_buf, [64, 64], dtype=pl.FP32)
        signal = pld.window(signal_buf, [N, 1], dtype=pl.INT32)
        kernel(x[r], y[r], data, signal, device=r)


x = np.ones((N, 64, 1024), np.float32)
y = np.zeros_like(x)
cfg = RunConfig(platform="a2a3sim", distributed_config=DistributedConfig(device_ids=[0, 1]))
host.compile(x, y, config=cfg)(x, y, config=cfg)
print("OK")
'''

CASES = {
    "a_distributed_tensor_passed_as_a_tensor": (
        "    pld.get_comm_ctx(x)",
        "get_comm_ctx needs a DistributedTensor, but 'host array [64, 1024]' is a local Tensor that no peer can reach",
    ),
    "fp32_scalar_arithmetic_on_a_peer_index": (
        "    pld.tile.remote_load(data, peer=(me + 1.0) % 2, offsets=[0, 0], shape=[1, 64])",
        "peer 1.0 is a float: a peer index is INT32 scalar arithmetic",
    ),
    "a_tile_over_capacity": (
        "    pl.load(x, [0, 0], [64, 1024])",
        "a [64, 1024] fp32 tile needs 262144 bytes of on-chip memory, but a2a3sim has",
    ),
    "a_misaligned_tile": (
        "    pl.load(x, [0, 0], [1, 10])",
        "tiles are 32-byte aligned, so pad the columns to a multiple of 8",
    ),
    "pipeline_without_chunk_sizes": (
        "    pld.tensor.put(data, 1 - me, x[0:1, 0:64], pipeline=True)",
        "put: pipeline=true needs both chunk_rows and chunk_cols; give both, or drop pipeline",
    ),
    # Every rank names the same peer: the first rank to fail cancels the
    # others, and which rank that is depends on timing.
    "a_peer_that_is_not_a_rank": (
        "    pld.tile.remote_load(data, peer=2, offsets=[0, 0], shape=[1, 64])",
        "remote_load: peer 2 is not a rank: the ranks are 0 to 1",
    ),
    "an_n_d_region_that_does_not_match_the_view": (
        "    pl.load(data, [0, 1, 0], [2, 2, 64])",
        "is not one 2-D rectangle once the leading dimensions are collapsed into rows",
    ),
    "a_region_outside_the_window_view": (
        "    pld.tile.remote_store(pl.load(x, [0, 0], [1, 64]), data, peer=1 - me, offsets=[64, 0])",
        "does not fit in 'data_buf' of shape [64, 64]",
    ),
    "a_barrier_on_a_data_view": (
        "    pld.tensor.barrier(data)",
        "barrier: 'data_buf' is fp32, but int32 is required; signal cells are int32",
    ),
    # A string where an enum goes is a TypeError naming the enum, never a
    # silent other member (atomic="Add" was a plain store) or an
    # AttributeError from inside pld.
    "a_string_for_a_notify_op": (
        '    pld.system.notify(signal, peer=1 - me, offsets=[me, 0], value=1, op="AtomicAdd")',
        "TypeError: pld.system.notify: op must be a pld.NotifyOp (pld.NotifyOp.Set, pld.NotifyOp.AtomicAdd), "
        "not the str 'AtomicAdd' (write pld.NotifyOp.AtomicAdd)",
    ),
    "a_string_for_a_wait_cmp": (
        '    pld.system.wait(signal, offsets=[me, 0], expected=0, cmp="Ge")',
        "TypeError: pld.system.wait: cmp must be a pld.WaitCmp",
    ),
    "a_string_for_an_atomic_type": (
        '    pld.tile.remote_store(pl.load(x, [0, 0], [1, 64]), data, peer=1 - me, offsets=[0, 0], atomic="Add")',
        "TypeError: pld.tile.remote_store: atomic must be a pld.AtomicType",
    ),
    "a_string_for_a_reduce_op": (
        '    pld.tensor.allreduce(data, signal, op="Sum")',
        "TypeError: pld.tensor.allreduce: op must be a pld.ReduceOp",
    ),
    "a_barrier_signal_of_the_wrong_shape": (
        "    pld.tensor.barrier(pld.tensor.allreduce(data, signal, mode='ring'))",
        "allreduce: the signal 'signal_buf' is [2, 1], but allreduce needs at least [2, 2] int32 cells",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_diagnostic(tmp_path, case):
    body, message = CASES[case]
    script = tmp_path / f"{case}.py"
    script.write_text(PROGRAM.format(body=body))
    out = run(script, "--timeout", "20")
    assert out.returncode != 0, out.stdout
    assert "OK" not in out.stdout
    assert message in out.stderr, out.stderr
    # The rank and the program's line are named.
    line = PROGRAM.format(body=body).splitlines().index(body) + 1
    assert f"failed at {script}:{line}" in out.stderr, out.stderr


def test_a_rank_that_raises_cancels_the_others_at_once(tmp_path):
    body = textwrap.indent(
        textwrap.dedent(
            """\
            if me == 1:
                raise ValueError("rank one gives up")
            pld.tensor.barrier(signal)
            """
        ),
        "    ",
    )
    script = tmp_path / "raises.py"
    script.write_text(PROGRAM.format(body=body.rstrip("\n")))
    start = time.monotonic()
    out = run(script, "--timeout", "60")
    took = time.monotonic() - start
    assert out.returncode != 0
    assert "rank 1 failed at" in out.stderr and "rank one gives up" in out.stderr, out.stderr
    # Rank 0's barrier was cancelled, not left to its 60 s deadline.
    assert took < 30, f"took {took:.1f}s"


def test_shapes_too_large_for_anything_are_refused_not_overflowed():
    """Shapes come from the program: the device's arithmetic on them is
    checked, so a huge one is an error, never an overflow (a panic)."""
    from pld_pypto import _native, errors

    c = _native.Cluster(2)
    try:
        r0 = c.ranks()[0]
        r0.alloc_window_buffer("b", 256)
        huge = [1 << 62, 1 << 62]
        view = (0, [1, 64], "fp32")
        elements = "has more than 2^48 elements, more than any window or chip holds"
        calls = [
            (lambda: r0.tile_from(b"", huge, [1, 1], "fp32"), errors.TooLarge, f"tile: 'a tile' of shape {huge} {elements}"),
            (lambda: r0.check_view((0, [1 << 40, 1 << 40, 1 << 40], "fp32")), errors.TooLarge, f"window: 'b' of shape [1099511627776, 1099511627776, 1099511627776] {elements}"),
            (lambda: r0.put(view, 1, b"", huge), errors.TooLarge, f"put: 'src' of shape {huge} {elements}"),
            (lambda: r0.remote_store((b"", huge), view, 1, [0, 0], False), errors.TooLarge, f"tensor: 'src' of shape {huge} {elements}"),
            (lambda: r0.load(view, [0, 0], huge), errors.TooLarge, f"tile: 'a tile' of shape {huge} {elements}"),
            (lambda: r0.get(view, 1, b"", huge), errors.TooLarge, f"get: 'dst' of shape {huge} {elements}"),
            (lambda: r0.alloc_window_buffer("too big", (1 << 64) - 1), errors.WindowFull,
             "allocating 18446744073709551615 bytes in window 'data' needs 18446744073709551615 bytes"),
        ]
        for call, kind, says in calls:
            with pytest.raises(kind) as e:
                call()
            assert says in str(e.value), str(e.value)
    finally:
        c.close()
