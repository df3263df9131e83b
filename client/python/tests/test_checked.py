"""Daemons started with ``--checked``: the ring shift example, ordered by
its barrier, runs without a race report at P = 2, 4 and 8 (the detector
sees the gRPC plane's own-window puts and gets as the owner's accesses),
and the daemons say they run checked."""

import subprocess
import sys

import pytest

from conftest import Cluster
from pld_client import Client
from test_client import EXAMPLE


@pytest.mark.parametrize("n", [2, 4, 8])
def test_ring_shift_runs_checked_without_a_race(n):
    c = Cluster(n, transport="tcp" if n == 4 else "quic", extra=["--checked"])
    try:
        for mode in ("load", "store"):
            r = subprocess.run(
                [sys.executable, str(EXAMPLE), "--daemons", ",".join(c.grpc), "--mode", mode],
                capture_output=True, text=True, timeout=120,
            )
            assert r.returncode == 0 and r.stdout.strip() == "OK", r.stderr
        for addr in c.grpc:
            client = Client(addr)
            assert client.info.checked == "on"
            assert client.stats()[("races", "")] == 0
    finally:
        c.stop()


def test_a_get_of_a_peer_slice_not_ordered_after_its_put_is_counted():
    import threading

    import numpy as np

    c = Cluster(2, extra=["--checked"])
    try:
        clients = [Client(a) for a in c.grpc]

        def rank(cl):
            r = cl.rank
            cl.put_array(r, 4096, np.full(64, r, np.int32))  # the own window
            cl.get_array((r + 1) % 2, 4096, (64,), np.int32)  # no barrier between
            cl.barrier()

        threads = [threading.Thread(target=rank, args=(cl,)) for cl in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for cl in clients:
            assert cl.stats()[("races", "")] == 1, "each owner's put races the peer's get"
    finally:
        c.stop()
