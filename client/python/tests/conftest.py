"""Real pld daemons for the tests: each fixture starts `pld-daemon`
processes on free loopback ports, with the gRPC client plane, and waits for
their ready lines."""

import os
import signal
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def daemon_bin() -> str:
    env = os.environ.get("PLD_DAEMON_BIN")
    if env:
        return env
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    for profile in ("debug", "release"):
        p = target / profile / "pld-daemon"
        if p.exists():
            return str(p)
    pytest.fail("no pld-daemon binary: run `cargo build -p pld-daemon` or set PLD_DAEMON_BIN")


def free_ports(n: int) -> list:
    """`n` loopback ports free for TCP and UDP, from the helper the Rust
    tests use (`pld-daemon ports`: below the ephemeral range, so no
    outgoing connection takes one first, and free for QUIC too)."""
    out = subprocess.run([daemon_bin(), "ports", str(n)], check=True, capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def pause(pid: int, within: float = 10.0):
    """SIGSTOP ``pid`` and wait until every thread of it has stopped: the
    signal is delivered asynchronously, and a thread still running for a
    moment would answer what the test means it not to."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + within
    while True:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                continue
        if states and all(s in ("T", "t") for s in states):
            return
        assert time.monotonic() < deadline, f"process {pid} not stopped {within}s after SIGSTOP: {states}"
        time.sleep(0.005)


class Cluster:
    def __init__(self, n: int, transport: str = "quic", extra=(), windows=("data=32MiB", "signal=64KiB", "collective=4MiB")):
        ports = free_ports(2 * n)
        peers = ",".join(f"127.0.0.1:{p}" for p in ports[:n])
        self.grpc = [f"127.0.0.1:{p}" for p in ports[n:]]
        self.procs = []
        self.cmds = []
        # The ranks authenticate each other under a throwaway cluster CA.
        self.tls_dir = tempfile.mkdtemp(prefix="pld-py-tls-")
        subprocess.run(
            [daemon_bin(), "certs", "--ranks", str(n), "--out", self.tls_dir],
            check=True, stdout=subprocess.DEVNULL,
        )
        for r in range(n):
            cmd = [
                daemon_bin(), "--rank", str(r), "--peers", peers, "--transport", transport,
                "--tls-dir", self.tls_dir,
                "--grpc", self.grpc[r], *(a for w in windows for a in ("--window", w)),
                "--sync-timeout", "20s", *extra,
            ]
            self.cmds.append(cmd)
            self.procs.append(
                subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            )
        for r, p in enumerate(self.procs):
            self._wait_ready(r, p, 30.0)

    def _wait_ready(self, rank, proc, within):
        lines = queue.Queue()

        def pump():
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + within
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"rank {rank} not ready within {within}s") from None
            if line is None:
                raise RuntimeError(f"rank {rank} exited: {proc.wait()}")
            if " ready on " in line:
                return

    def restart(self, r: int):
        """Kills rank ``r``'s daemon (SIGKILL) and starts it again, as a new run."""
        self.procs[r].kill()
        self.procs[r].wait()
        self.procs[r] = subprocess.Popen(self.cmds[r], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._wait_ready(r, self.procs[r], 30.0)

    def stop(self):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        shutil.rmtree(self.tls_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster2():
    c = Cluster(2)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def cluster4():
    c = Cluster(4, transport="tcp")
    yield c
    c.stop()
