"""Small-op rate from Python: unary calls against one Batch call.

    python batch_rate.py --daemon 127.0.0.1:50051 --remote 1 [--ops 64]

Times ``--rounds`` rounds of ``--ops`` 8-byte puts to rank ``--remote``,
once as unary Put calls (each a gRPC round trip with a peer-plane round
trip inside) and once as one Batch call (the ops leave the daemon back to
back and come back under cumulative acknowledgements), interleaved round
by round. Prints ops per second for each and their ratio.
"""

import argparse
import time

from pld_client import Client


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--remote", type=int, default=1)
    ap.add_argument("--ops", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=200)
    a = ap.parse_args()
    c = Client(a.daemon)
    data = bytes(8)
    unary = batched = 0.0
    for r in range(a.rounds + a.rounds // 10):
        t0 = time.perf_counter()
        for i in range(a.ops):
            c.put(a.remote, 8 * i, data)
        t1 = time.perf_counter()
        b = c.batch()
        for i in range(a.ops):
            b.put(a.remote, 8 * i, data)
        b.run()
        t2 = time.perf_counter()
        if r >= a.rounds // 10:  # after the warm-up
            unary += t1 - t0
            batched += t2 - t1
    n = a.ops * a.rounds
    print(f"unary put: {n / unary:,.0f} ops/s; batch of {a.ops}: {n / batched:,.0f} ops/s "
          f"({unary / batched:.1f}x)")


if __name__ == "__main__":
    main()
