"""Atomics under faults, from Python clients: threads run fetch_add and
compare_swap on shared counters of a 4-rank cluster through two daemons
while one daemon (a gRPC front that holds no counter) is killed and
restarted and a counter's rank is stalled (SIGSTOP) past the op timeout.
Every call is recorded; the history must be linearizable for a counter
(the rules of `client/tests/linearizable.rs`): the values successful calls
returned are distinct, a call that returned before another was invoked got
the smaller one, and each failed call was applied once or not at all. The
counters live on ranks that are never restarted: a restarted rank's windows
start zeroed (docs/semantics.md). Seeded; a failure prints the history.
"""

import os
import random
import signal
import threading
import time

from conftest import Cluster
from pld_client import Client, PldError

CELLS = [(1, 0), (2, 64)]
CALLS_EACH = 150


def run_client(name, addr, seed, history, lock):
    rng = random.Random(seed)
    cl = Client(addr)
    seen = [0] * len(CELLS)
    for _ in range(CALLS_EACH):
        cell = rng.randrange(len(CELLS))
        rank, at = CELLS[cell]
        cas = rng.randrange(3) == 0
        expected = seen[cell]
        t0 = time.monotonic()
        try:
            if cas:
                v = cl.compare_swap(rank, at, expected, expected + 1)
                seen[cell] = v + 1 if v == expected else v
                outcome = ("ok", expected if v == expected else None)
            else:
                v = cl.fetch_add(rank, at, 1)
                seen[cell] = v + 1
                outcome = ("ok", v)
        except PldError as e:
            outcome = ("failed", f"{e.code}: {e}")
        t1 = time.monotonic()
        with lock:
            history.append((name, cell, "compare_swap" if cas else "fetch_add", t0, t1, outcome))
    cl.close()


def check(history, cell, last):
    mine = [h for h in history if h[1] == cell]
    claimed = sorted((h[5][1], h) for h in mine if h[5][0] == "ok" and h[5][1] is not None)
    failed = sum(1 for h in mine if h[5][0] == "failed")
    values = [v for v, _ in claimed]
    assert len(values) == len(set(values)), f"a value returned twice: {values}"
    assert all(0 <= v < last for v in values), f"a claim outside 0..{last}"
    assert len(values) <= last <= len(values) + failed, (
        f"the counter ended at {last}: {len(values)} claims, {failed} failures"
    )
    for va, a in claimed:
        for vb, b in claimed:
            assert not (a[4] < b[3] and va > vb), f"{a} returned before {b} was invoked"


def test_fetch_add_and_compare_swap_stay_linearizable_while_ranks_die_and_stall():
    seed = int(os.environ.get("PLD_TEST_SEED", "24301"))
    c = Cluster(4, transport="tcp", extra=("--op-timeout", "2s"))
    history, lock = [], threading.Lock()
    try:
        threads = [
            threading.Thread(target=run_client, args=(f"client {i} of rank {front}", c.grpc[front], seed + i, history, lock))
            for i, front in enumerate([3, 3, 0])
        ]
        for t in threads:
            t.start()

        def wait_calls(n):
            while len(history) < n and any(t.is_alive() for t in threads):
                time.sleep(0.02)

        wait_calls(100)
        c.restart(3)
        wait_calls(250)
        os.kill(c.procs[2].pid, signal.SIGSTOP)
        # The stall lasts past the op timeout (2 s): calls to rank 2 fail,
        # and it applies them when it resumes.
        time.sleep(3)
        os.kill(c.procs[2].pid, signal.SIGCONT)
        for t in threads:
            t.join(timeout=180)
            assert not t.is_alive(), "a client did not finish"
        reader = Client(c.grpc[0])
        try:
            assert any(h[5][0] == "failed" for h in history), "the faults failed no call"
            for cell, (rank, at) in enumerate(CELLS):
                last = int.from_bytes(reader.get(rank, at, 8), "little", signed=True)
                try:
                    check(history, cell, last)
                except AssertionError:
                    for h in history:
                        print(h)
                    print(f"seed {seed}")
                    raise
        finally:
            reader.close()
    finally:
        c.stop()
