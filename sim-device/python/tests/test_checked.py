"""``pld-pypto --checked``: a program whose remote reads are not ordered
after the owner's stores is reported — both ranks, the bytes, the
catalog's fix, each race once — and fails; our whole program set, run
checked at P = 2, 4 and 8, reports nothing."""

import pytest

from conftest import EXAMPLES, run
from test_programs import PROGRAMS, SIZE_SPLITS_INTO_P, mode_args

# Step 05's load mode; BARRIER is the line the broken variant leaves out.
LOAD_MODE = '''
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig
import sys

P = int(sys.argv[1])


@pl.jit.incore
def shift(x: pl.Tensor[[1, 64], pl.FP32], y: pl.Out[pl.Tensor[[1, 64], pl.FP32]],
          data: pld.DistributedTensor[[1, 64], pl.FP32], signal: pld.DistributedTensor[[P, 1], pl.INT32]):
    ctx = pld.get_comm_ctx(data)
    me, n = pld.rank(ctx), pld.nranks(ctx)
    data = pl.store(pl.load(x, [0, 0], [1, 64]), [0, 0], data)
    BARRIER
    recv = pld.tile.remote_load(data, peer=(me + 1) % n, offsets=[0, 0], shape=[1, 64])
    y = pl.store(recv, [0, 0], y)
    signal = pld.tensor.barrier(signal)
    return y


@pl.jit.host
def ring(x: pl.Tensor[[P, 1, 64], pl.FP32], y: pl.Out[pl.Tensor[[P, 1, 64], pl.FP32]]):
    data_buf = pld.alloc_window_buffer([1, 64], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([P, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        shift(x[r], y[r], pld.window(data_buf, [1, 64], dtype=pl.FP32),
              pld.window(signal_buf, [P, 1], dtype=pl.INT32), device=r)


x = np.arange(P * 64, dtype=np.float32).reshape(P, 1, 64)
y = np.zeros_like(x)
cfg = RunConfig(platform="a2a3sim", distributed_config=DistributedConfig(device_ids=list(range(P))))
ring.compile(x, y, config=cfg)(x, y, config=cfg)
want = np.stack([x[(r + 1) % P] for r in range(P)])
assert np.array_equal(y, want), f"got {y.tolist()}, want {want.tolist()}"
print("OK")
'''


def program(tmp_path, barrier):
    line = "signal = pld.tensor.barrier(signal)" if barrier else "pass"
    f = tmp_path / ("ordered.py" if barrier else "unordered.py")
    f.write_text(LOAD_MODE.replace("BARRIER", line))
    return f


@pytest.mark.parametrize("p", [2, 4])
def test_a_remote_load_before_the_barrier_is_reported_once_and_fails(tmp_path, p):
    out = run(program(tmp_path, barrier=False), "--checked", str(p))
    assert out.returncode == 1, out.stdout + out.stderr
    races = [l for l in out.stderr.splitlines() if l.startswith("race on")]
    assert len(races) == p, out.stderr
    assert len(set(races)) == p, "each race once"
    r0 = next(l for l in races if "rank 0's window" in l)
    assert "rank 0 stored into its own" in r0 and f"rank {1 if p == 2 else p - 1} read" in r0, r0
    assert "bytes 0..256 (data_buf[0, 0:64] of [1, 64])" in r0, r0
    assert "in load mode, stage, then barrier, then remote_load" in r0, r0
    assert "OK" not in out.stdout


def test_the_same_program_with_its_barrier_reports_nothing(tmp_path):
    out = run(program(tmp_path, barrier=True), "--checked", "--transport", "tcp", "4")
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr


def test_strict_mode_refuses_the_racing_remote_load_and_the_program_fails(tmp_path):
    out = run(program(tmp_path, barrier=False), "--checked=strict", "2")
    assert out.returncode != 0, out.stdout + out.stderr
    assert "race on rank" in out.stderr, out.stderr
    assert "in load mode, stage, then barrier, then remote_load" in out.stderr, out.stderr
    assert "OK" not in out.stdout


def test_strict_mode_runs_the_ordered_program(tmp_path):
    out = run(program(tmp_path, barrier=True), "--checked=strict", "--transport", "tcp", "2")
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr


def checked_cases():
    # QUIC at P = 2, 4 and 8; TCP (docs/checked.md: either transport) at 4.
    for name, modes in PROGRAMS:
        for p, transport in ((2, "quic"), (4, "quic"), (8, "quic"), (4, "tcp")):
            for mode in modes or [None]:
                yield name, mode, p, transport


@pytest.mark.parametrize("name,mode,p,transport", list(checked_cases()))
def test_every_program_runs_checked_without_a_report(name, mode, p, transport):
    args = ["-p", "a2a3sim", "-d", ",".join(str(i) for i in range(p)), *mode_args(mode)]
    out = run(EXAMPLES / name, "--checked", "--transport", transport, *args, timeout=180)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr
