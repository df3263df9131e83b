"""The pytest plugin (``-p pld_pypto.pytest_plugin``, or ``PLD_PYPTO=1``):
a test written as PyPTO's distributed system tests are — its
``test_config`` and ``device_ids`` fixtures, ``--device`` and
``--platform``, ``@pytest.mark.platforms`` — runs on pld ranks."""

import os
import subprocess
import sys
import textwrap

import pytest

from pld_pypto.pytest_plugin import parse_devices

TEST = textwrap.dedent('''\
    import numpy as np
    import pytest
    import pypto.language as pl
    import pypto.language.distributed as pld
    from pypto import ir
    from pypto.ir.distributed_compiled_program import DistributedConfig

    N = 64


    @pl.program
    class Shift:
        @pl.function(type=pl.FunctionType.InCore)
        def step(self, inp, out, win, signal, peer):
            pl.store(pl.load(inp, [0, 0], [1, N]), [0, 0], win)
            pld.tensor.barrier(signal)
            t = pld.tile.remote_load(win, peer=peer, offsets=[0, 0], shape=[1, N])
            return pl.store(t, [0, 0], out)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, inputs, outputs):
            buf = pld.alloc_window_buffer(N * pl.FP32.get_byte())
            sig = pld.alloc_window_buffer(8 * pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                win = pld.window(buf, [1, N], dtype=pl.FP32)
                signal = pld.window(sig, [pld.world_size(), 1], dtype=pl.INT32)
                self.step(inputs[r], outputs[r], win, signal, (r + 1) % pld.world_size(), device=r)
            return outputs


    def test_the_fixtures_are_the_command_line(test_config, device_ids):
        assert device_ids == [0, 1, 2]
        assert test_config.platform == "a2a3sim"


    def test_a_ring_shift_on_the_devices(test_config, device_ids):
        n = len(device_ids)
        compiled = ir.compile(Shift, platform=test_config.platform,
                              distributed_config=DistributedConfig(device_ids=device_ids))
        x = np.arange(n * N, dtype=np.float32).reshape(n, 1, N)
        y = np.zeros_like(x)
        compiled(x, y)
        assert np.array_equal(y, np.roll(x, -1, axis=0))


    @pytest.mark.platforms("a5", "a5sim")
    def test_deselected_on_a2a3():
        raise AssertionError("a test for a5 ran on a2a3sim")
''')


def _run(tmp_path, *args, env=None):
    (tmp_path / "test_upstream_style.py").write_text(TEST)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )


def test_an_upstream_style_test_runs_with_the_plugin(tmp_path):
    r = _run(tmp_path, "-p", "pld_pypto.pytest_plugin", "--device", "0-2", "--platform", "a2a3sim")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed, 1 deselected" in r.stdout, r.stdout


def test_pld_pypto_1_loads_the_plugin_by_itself(tmp_path):
    env = dict(os.environ, PLD_PYPTO="1")
    r = _run(tmp_path, "--device", "0,1,2", "--pld-transport", "tcp", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed, 1 deselected" in r.stdout, r.stdout


def test_without_it_pypto_is_not_pld_s(tmp_path):
    # Without the plugin nothing provides `pypto` (and no `--device`):
    # collecting the test fails on its import, naming the module.
    env = {k: v for k, v in os.environ.items() if k != "PLD_PYPTO"}
    r = _run(tmp_path, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert "ModuleNotFoundError: No module named 'pypto'" in out, out
    assert "passed" not in out, out


@pytest.mark.parametrize("raw, ids", [("0", [0]), ("0-3", [0, 1, 2, 3]), ("0,1,12", [0, 1, 12]),
                                      ("0-1,8,12-13", [0, 1, 8, 12, 13])])
def test_device_lists_read_as_pypto_reads_them(raw, ids):
    assert parse_devices(raw) == ids


@pytest.mark.parametrize("raw, says", [
    ("", "must not be empty"),
    ("3-1", "must be non-decreasing"),
    ("0,x", "takes ids, ranges and lists"),
    ("0,0", "lists a device twice"),
    (",", "lists no device"),
    (" , ,", "lists no device"),
    ("0-1000000000", "lists more than 1024 devices"),
    ("0-1000,1001-2000", "lists more than 1024 devices"),
])
def test_a_bad_device_list_is_a_usage_error_saying_why(raw, says):
    with pytest.raises(pytest.UsageError) as e:
        parse_devices(raw)
    assert says in str(e.value), str(e.value)


CODEGEN_TEST = textwrap.dedent('''\
    def test_host_tensor_allreduce():
        raise AssertionError("an out-of-scope test ran")


    def test_host_tensor_allreduce_fp32_arbitrary_lengths():
        pass
''')


def test_tests_that_read_generated_code_are_skipped_naming_why(tmp_path):
    # Named as the upstream file is: its codegen-asserting test is skipped,
    # the results-only test beside it runs.
    (tmp_path / "test_l3_host_tensor_allreduce.py").write_text(CODEGEN_TEST)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "pld_pypto.pytest_plugin",
         "--transport", "tcp", "--checked", "on", str(tmp_path / "test_l3_host_tensor_allreduce.py")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed, 1 skipped" in r.stdout, r.stdout
    assert "out of scope on pld: asserts on the code generator's output files" in r.stdout, r.stdout
