"""Fixtures: the ``pld-pypto`` command of the installed package, and real
``pld-daemon`` processes for the runs against daemons."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def pld_pypto():
    exe = shutil.which("pld-pypto", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.fail("pld-pypto is not installed in this environment: pip install ./sim-device/python")
    return exe


def run(script, *args, env=None, timeout=120):
    """Runs ``pld-pypto [opts] script args``; returns the CompletedProcess."""
    opts, rest = [], list(args)
    while rest and (rest[0] in ("--transport", "--daemons", "--timeout", "--trace") or rest[0].startswith("--checked")):
        n = 1 if rest[0].startswith("--checked") else 2
        opts += rest[:n]
        rest = rest[n:]
    return subprocess.run(
        [pld_pypto(), *opts, str(script), *rest],
        capture_output=True, text=True, timeout=timeout, env=env,
    )


def run_program(tmp_path, name, text, *args):
    """Writes ``text`` as ``name.py`` and runs it with ``pld-pypto``."""
    script = tmp_path / f"{name}.py"
    script.write_text(text)
    return run(script, *args)


def assert_ok(r):
    """The program ran and printed its own OK."""
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr


def assert_fails(r, message):
    """The program failed, saying ``message``."""
    assert r.returncode != 0
    assert message in r.stderr, r.stderr


def daemon_bin():
    env = os.environ.get("PLD_DAEMON_BIN")
    if env:
        return env
    p = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "debug" / "pld-daemon"
    if not p.exists():
        pytest.fail("no pld-daemon binary: run `cargo build -p pld-daemon` or set PLD_DAEMON_BIN")
    return str(p)


def _ports(n: int) -> list:
    """`n` loopback ports free for TCP and UDP, from the helper the Rust
    tests use (`pld-daemon ports`: below the ephemeral range, so no
    outgoing connection takes one first, and free for QUIC too)."""
    out = subprocess.run([daemon_bin(), "ports", str(n)], check=True, capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


@contextlib.contextmanager
def running_daemons(n, *extra):
    """``n`` pld-daemons (mutual TLS, ``extra`` flags each), started and
    ready; yields their processes and gRPC addresses, and kills them."""
    ports = _ports(2 * n)
    peers = ",".join(f"127.0.0.1:{p}" for p in ports[:n])
    grpc = [f"127.0.0.1:{p}" for p in ports[n:]]
    tls = tempfile.mkdtemp(prefix="pld-pypto-tls-")
    subprocess.run([daemon_bin(), "certs", "--ranks", str(n), "--out", tls], check=True, stdout=subprocess.DEVNULL)
    procs = [
        subprocess.Popen(
            [daemon_bin(), "--rank", str(r), "--peers", peers, "--tls-dir", tls, "--grpc", grpc[r], *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        for r in range(n)
    ]
    try:
        for p in procs:
            # The ready line says the mesh is up and gRPC serves (the daemon
            # exits, ending its output, if it cannot get there).
            while True:
                line = p.stdout.readline()
                if not line:
                    pytest.fail(f"a pld-daemon exited before it was ready: {p.wait()}")
                if " ready on " in line:
                    break
        yield procs, grpc
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tls, ignore_errors=True)


@pytest.fixture(scope="module")
def daemons():
    """Two pld-daemons (QUIC, mutual TLS), their gRPC addresses joined.
    Their data window is the compose demo's (16 MiB): smaller than what
    pld-pypto gives ranks it starts itself, so a program must fit the
    window a daemon has rather than ask for its own default."""
    extra = ("--window", "data=16MiB", "--window", "signal=64KiB", "--sync-timeout", "20s")
    with running_daemons(2, *extra) as (_, grpc):
        yield ",".join(grpc)


def pause(proc, within=10.0):
    """SIGSTOP ``proc`` and wait until every thread of it has stopped: the
    signal is delivered asynchronously, and a thread still running for a
    moment would answer what the test means it not to."""
    proc.send_signal(signal.SIGSTOP)
    deadline = time.monotonic() + within
    while True:
        states = []
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            try:
                with open(f"/proc/{proc.pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                continue
        if states and all(s in ("T", "t") for s in states):
            return
        assert time.monotonic() < deadline, f"process {proc.pid} not stopped {within}s after SIGSTOP: {states}"
        time.sleep(0.005)
