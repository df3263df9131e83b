"""Atomics under faults, from Python clients: threads run fetch_add and
compare_swap on two counters and swap on a register of a 4-rank cluster,
paced, for a fixed time, while on a schedule of times one daemon (a gRPC
front) is killed and restarted and a counter's rank is stalled (SIGSTOP,
waited for) past the op timeout. The history must be linearizable, by the
rules of ``client/tests/common/linear.rs``: for a counter, distinct values
in real-time order, every value no successful call took explained by a
failed call that could have taken it then (so a success applied twice is
caught), and what a compare_swap that found another value read lying
between the calls around it; for the register, the values chained from 0
through every successful swap to the final one. Each fault must have met
calls. Seeded; a failure prints the history.
"""

import os
import random
import signal
import threading
import time

from conftest import Cluster, pause
from pld_client import Client, PldError

# (rank, offset): two counters, then a swap register.
CELLS = [(1, 0), (2, 64), (2, 128)]
COUNTERS = 2
PACE = 0.003


def run_client(cid, name, addr, seed, history, lock, stop):
    rng = random.Random(seed)
    cl = Client(addr)
    seen = [0] * COUNTERS
    seq = 0
    while not stop.is_set():
        cell = rng.randrange(len(CELLS))
        rank, at = CELLS[cell]
        wrote = None
        t0 = time.monotonic()
        try:
            if cell >= COUNTERS:
                seq += 1
                wrote = ((cid + 1) << 40) | seq
                outcome = ("swapped", cl.swap(rank, at, wrote))
            elif rng.randrange(3) == 0:
                expected = seen[cell]
                v = cl.compare_swap(rank, at, expected, expected + 1)
                seen[cell] = v + 1 if v == expected else v
                outcome = ("took", v) if v == expected else ("saw", v)
            else:
                v = cl.fetch_add(rank, at, 1)
                seen[cell] = v + 1
                outcome = ("took", v)
        except PldError as e:
            outcome = ("failed", f"{e.reason} {e.code}: {e}")
        t1 = time.monotonic()
        with lock:
            history.append({"client": name, "cell": cell, "wrote": wrote, "invoked": t0, "returned": t1,
                            "outcome": outcome})
        time.sleep(PACE)
    cl.close()


def applied(c):
    """When a failed call may have been applied (``linear.rs``'s
    ``Applied``): "never" (the front was not reached, or refused it before
    sending it on), "by return" (its link broke), or "later" (it timed out
    in flight: a stalled target applies it when it resumes)."""
    e = c["outcome"][1]
    if any(n in e for n in ("failed to connect", "Connection refused", "not serving yet", "NOT_READY")):
        return "never"
    if "OP_TIMEOUT" in e or "got no reply within" in e:
        return "later"
    return "by return"


def check_counter(calls, last):
    claims = sorted((c["outcome"][1], c) for c in calls if c["outcome"][0] == "took")
    values = [v for v, _ in claims]
    assert len(values) == len(set(values)), f"a value taken twice: {values}"
    assert all(0 <= v < last for v in values), f"a value taken outside 0..{last}"
    for va, a in claims:
        for vb, b in claims:
            assert not (a["returned"] < b["invoked"] and va > vb), f"{a} returned before {b} was invoked"

    def window(c):
        lo = max((v + 1 for v, b in claims if b["returned"] < c["invoked"]), default=0)
        hi = min((v for v, b in claims if b["invoked"] > c["returned"]), default=last)
        return lo, hi

    for c in calls:
        if c["outcome"][0] == "saw":
            lo, hi = window(c)
            assert lo <= c["outcome"][1] <= hi, f"{c} read a value the counter did not hold then ({lo}..{hi})"
    # Every value nobody took, to a failed call that could have taken it
    # then: gaps in order, each to the open window that closes first.
    taken = set(values)
    gaps = [v for v in range(last) if v not in taken]
    windows = sorted(
        (window(c)[0], last if applied(c) == "later" else window(c)[1], i)
        for i, c in enumerate(calls)
        if c["outcome"][0] == "failed" and applied(c) != "never"
    )
    open_, nxt = [], 0
    for g in gaps:
        while nxt < len(windows) and windows[nxt][0] <= g:
            open_.append(windows[nxt])
            nxt += 1
        open_ = [w for w in open_ if w[1] >= g]
        assert open_, f"value {g} was taken, but by no call that succeeded, and no failed call could have then"
        open_.remove(min(open_, key=lambda w: w[1]))


def check_swaps(calls, last):
    writer = {c["wrote"]: c for c in calls if c["wrote"] is not None}
    out = {}
    for c in calls:
        if c["outcome"][0] == "swapped":
            v = c["outcome"][1]
            assert v not in out, f"value {v} returned twice: {out[v]} and {c}"
            out[v] = c
            if v != 0:
                assert v in writer, f"{c} returned {v}, which no call wrote"
                assert writer[v]["invoked"] <= c["returned"], f"{c} returned a value written after it returned"
    assert last == 0 or last in writer, f"the register holds {last}, which no call wrote"
    failed = [c for c in calls if c["outcome"][0] == "failed" and applied(c) != "never"]
    seen, joins, ends = 0, 0, False
    for i, head in enumerate([0] + [c["wrote"] for c in failed]):
        at, prev, n = head, None, 0
        while at in out:
            c = out[at]
            assert prev is None or c["returned"] >= prev["invoked"], f"{c} returned before {prev} was invoked"
            prev, at, n = c, c["wrote"], n + 1
            assert n <= len(calls), "the swaps' values form a cycle"
        seen += n
        if at == last:
            ends = True
        elif n > 0 or i == 0:
            joins += 1
    assert seen == len(out), f"{len(out) - seen} successful swaps on no chain"
    assert ends, f"no chain of swaps ends at the register's value {last}"
    assert joins <= len(failed), f"{joins} chains end at a value no swap replaced; {len(failed)} swaps failed"


def test_atomics_and_swaps_stay_linearizable_while_ranks_die_and_stall():
    seed = int(os.environ.get("PLD_TEST_SEED", "24301"))
    c = Cluster(4, transport="tcp", extra=("--op-timeout", "2s"))
    history, lock, stop = [], threading.Lock(), threading.Event()
    try:
        fronts = [3, 3, 0]
        threads = [
            threading.Thread(target=run_client,
                             args=(i, f"client {i} of rank {front}", c.grpc[front], seed + i, history, lock, stop))
            for i, front in enumerate(fronts)
        ]
        for t in threads:
            t.start()
        # The faults, on a schedule of times (the clients are paced).
        time.sleep(1.0)
        killed = time.monotonic()
        c.restart(3)
        ready = time.monotonic()
        time.sleep(1.0)
        stalled = time.monotonic()
        pause(c.procs[2].pid)
        # Past the op timeout (2 s): calls to rank 2 fail, and it applies
        # them when it resumes.
        time.sleep(3)
        os.kill(c.procs[2].pid, signal.SIGCONT)
        resumed = time.monotonic()
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(timeout=60)
            assert not t.is_alive(), "a client did not finish"
        met = {
            "a call through rank 3 failed while it restarted": any(
                h["client"].endswith("rank 3") and h["outcome"][0] == "failed" and killed <= h["invoked"] <= ready
                for h in history),
            "a call through rank 3 succeeded after its restart": any(
                h["client"].endswith("rank 3") and h["outcome"][0] != "failed" and h["invoked"] > ready
                for h in history),
            "a call to the stalled rank 2 timed out (OP_TIMEOUT)": any(
                CELLS[h["cell"]][0] == 2 and h["outcome"][0] == "failed" and stalled <= h["invoked"] <= resumed
                and h["outcome"][1].startswith("OP_TIMEOUT ")
                for h in history),
        }
        missed = [what for what, ok in met.items() if not ok]
        assert not missed, f"the schedule missed the clients: {missed}"
        reader = Client(c.grpc[0])
        try:
            for cell, (rank, at) in enumerate(CELLS):
                last = int.from_bytes(reader.get(rank, at, 8), "little", signed=True)
                mine = [h for h in history if h["cell"] == cell]
                try:
                    (check_counter if cell < COUNTERS else check_swaps)(mine, last)
                except AssertionError:
                    for h in history:
                        print(h)
                    print(f"seed {seed}")
                    raise
        finally:
            reader.close()
    finally:
        c.stop()
