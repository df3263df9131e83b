"""Our own program set, run as a user runs it: ``pld-pypto program.py``
must print the program's own OK at P = 2, the any-P ones also at P = 3 and
4, in every mode, in-process (QUIC and TCP) and against real daemons."""

import pytest

from conftest import EXAMPLES, run

# (program, modes): every program takes any P >= 2, except that steps 09
# and 10 split SIZE = 64 into P chunks, as the tutorial's do (P = 2, 4, 8).
PROGRAMS = [
    ("01_hello_rank.py", []),
    ("02_programming_model.py", []),
    ("03_window_buffer.py", []),
    ("04_barrier.py", ["", "--use-builtin"]),
    ("05_remote_load_store.py", ["load", "store"]),
    ("06_put_get.py", ["put", "get"]),
    ("07_put_get_any_p.py", ["put", "get"]),
    ("08_allreduce_mesh.py", []),
    ("09_allreduce_two_phase.py", []),
    ("10_allreduce_ring.py", []),
    ("11_allreduce_builtin.py", ["mesh", "ring"]),
    ("12_broadcast.py", ["hand", "builtin"]),
    ("13_allgather.py", ["hand", "builtin"]),
    ("14_reduce_scatter.py", ["hand", "builtin"]),
    ("15_all_to_all.py", ["hand", "builtin"]),
    ("16_putting_it_together.py", []),
    ("push_scaled.py", []),
    ("all_to_all_combine.py", ["fp32", "fp16"]),
]
SIZE_SPLITS_INTO_P = {"09_allreduce_two_phase.py", "10_allreduce_ring.py"}


def mode_args(mode):
    if not mode:
        return []
    return [mode] if mode.startswith("--") else ["--mode", mode]


def cases():
    for name, modes in PROGRAMS:
        for p in (2, 3, 4):
            if p == 3 and name in SIZE_SPLITS_INTO_P:
                continue
            for mode in modes or [None]:
                yield name, mode, p


@pytest.mark.parametrize("name,mode,p", list(cases()))
def test_program_prints_ok_in_process(name, mode, p):
    args = ["-p", "a2a3sim", "-d", ",".join(str(i) for i in range(p)), *mode_args(mode)]
    transport = ["--transport", "tcp"] if p == 3 else []
    out = run(EXAMPLES / name, *transport, *args)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr


@pytest.mark.parametrize("name,modes", PROGRAMS)
def test_program_prints_ok_against_daemons(daemons, name, modes):
    for mode in modes or [None]:
        out = run(EXAMPLES / name, "--daemons", daemons, "-p", "a2a3sim", "-d", "0,1", *mode_args(mode))
        assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr


def test_a_step_whose_size_does_not_split_says_so():
    out = run(EXAMPLES / "10_allreduce_ring.py", "-d", "0,1,2")
    assert out.returncode != 0
    assert "run with P = 2, 4 or 8 ranks, not 3" in out.stderr


def test_python_dash_m_runs_the_same_command():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "pld_pypto", str(EXAMPLES / "05_remote_load_store.py"), "-d", "0,1", "--mode", "store"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr


def test_compile_only_prints_the_output_dir_and_runs_nothing():
    out = run(EXAMPLES / "05_remote_load_store.py", "-d", "0,1", "--compile-only")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("compile_only done: ") and "OK" not in out.stdout


ND_PROGRAM = """\
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig


@pl.jit.incore
def kernel(x, y, cube, signal):
    me = pld.rank(pld.get_comm_ctx(cube))
    # Stage rows of x into the [2, 4, 64] view, then read a [1, 2, 64]
    # region back (rows 6 and 7 once collapsed) from the next rank.
    for i in pl.range(8):
        cube = pl.store(pl.load(x, [0, i, 0], [1, 1, 64]), [i, 0], cube)
    pld.tensor.barrier(signal)
    mine = pl.load(cube, [1, 2, 0], [1, 2, 64])
    y = pl.store(mine, [0, 0], y)
    pld.tensor.barrier(signal)
    return y


@pl.jit.host
def host(x, y):
    cube_buf = pld.alloc_window_buffer([2, 4, 64], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        cube = pld.window(cube_buf, [2, 4, 64], dtype=pl.FP32)
        kernel(x[r], y[r], cube, pld.window(signal_buf, [2, 1], dtype=pl.INT32), device=r)


x = np.arange(2 * 8 * 64, dtype=np.float32).reshape(2, 1, 8, 64)
y = np.zeros((2, 2, 64), np.float32)
cfg = RunConfig(distributed_config=DistributedConfig(device_ids=[0, 1]))
host.compile(x, y, config=cfg)(x, y, config=cfg)
assert np.array_equal(y, x[:, 0, 6:8, :]), y
print("OK")
"""


def test_n_d_window_views_load_the_collapsed_rectangle(tmp_path):
    script = tmp_path / "nd.py"
    script.write_text(ND_PROGRAM)
    out = run(script)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr
