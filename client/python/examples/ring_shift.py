#!/usr/bin/env python3
"""The seed's ring shift (tutorial step 05) across running pld daemons.

Every rank holds a slice x[r] and ends with its neighbour's:

  --mode load   y[r] = x[(r+1) % N]: stage x[r] in the own window, barrier,
                then read the next rank's window (remote load);
  --mode store  y[r] = x[(r-1) % N]: write x[r] into the next rank's window
                (remote store), barrier, then read the own window.

The barrier orders the remote accesses, exactly as in the seed. One thread
per rank drives its daemon, given as gRPC addresses in rank order:

  python ring_shift.py --daemons 127.0.0.1:50051,127.0.0.1:50052 --mode store
"""

import argparse
import sys
import threading

import numpy as np

from pld_client import Client, PldError

SIZE = 4096  # fp32 elements per slice (the seed's [1, SIZE] tile)


def x_of(rank: int) -> np.ndarray:
    return (np.arange(SIZE, dtype=np.float32) * 0.5 + 1000.0 * rank).reshape(1, SIZE)


def run_rank(client: Client, mode: str, offset: int, results: dict) -> None:
    r, n = client.rank, client.nranks
    x = x_of(r)
    if mode == "load":
        client.put_array(r, offset, x)  # stage in the own window
        client.barrier()
        y = client.get_array((r + 1) % n, offset, (1, SIZE), np.float32)
        want = x_of((r + 1) % n)
    else:
        client.put_array((r + 1) % n, offset, x)  # push into the next rank's window
        client.barrier()
        y = client.get_array(r, offset, (1, SIZE), np.float32)
        want = x_of((r - 1) % n)
    # A second barrier: no rank may overwrite a slice (say, in a run that
    # follows) while its reader is still reading it.
    client.barrier()
    results[r] = float(np.max(np.abs(y - want)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--daemons", required=True, help="gRPC HOST:PORT of every daemon, in rank order")
    p.add_argument("--mode", choices=["load", "store"], default="load")
    p.add_argument("--token", default=None, help="the daemons' client token, if they have one")
    p.add_argument("--offset", type=int, default=0, help="byte offset of the slice in window 'data'")
    args = p.parse_args()
    addrs = [a.strip() for a in args.daemons.split(",") if a.strip()]
    clients = [Client(a, token=args.token) for a in addrs]
    for i, c in enumerate(clients):
        if c.rank != i or c.nranks != len(addrs):
            print(
                f"daemon {addrs[i]} is rank {c.rank} of {c.nranks}; "
                f"--daemons must list all {c.nranks} daemons in rank order",
                file=sys.stderr,
            )
            return 2
    results, errors = {}, []

    def body(c: Client) -> None:
        try:
            run_rank(c, args.mode, args.offset, results)
        except PldError as e:
            errors.append(f"rank {c.rank}: {e}")

    threads = [threading.Thread(target=body, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    if errors:
        for e in errors:
            print(e, file=sys.stderr)
        return 1
    worst = max(results.values())
    if worst == 0.0:
        print("OK")
        return 0
    print(f"FAILED: largest difference {worst}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
