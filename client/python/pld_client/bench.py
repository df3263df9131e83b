"""Client-plane latency from Python: ``python -m pld_client.bench --daemon ADDR``.

Times, over one channel to a daemon (which acts as its rank), unary calls of
8 bytes in interleaved rounds — one of each per round, so that a slow phase
of the machine lands on all of them alike:

- ``check``: ``grpc.health.v1.Health/Check``, a gRPC round trip that does
  nothing (the floor every other call is compared with);
- ``put_own`` / ``get_own``: Put / Get to the daemon's own rank;
- ``put_remote`` / ``get_remote``: Put / Get to ``--remote`` (a peer-plane
  round trip inside the call).

Prints one JSON object per call: median and p99 in microseconds, and both
as a ratio of the Check's median. ``pld-bench grpc --python PYTHON`` runs
this next to its Rust client, against the same daemons.
"""

from __future__ import annotations

import argparse
import json
import time

import grpc

from pld_client._proto.pld.v1 import pld_pb2 as pb
from pld_client._proto.pld.v1 import pld_pb2_grpc as pb_grpc

CALLS = ("check", "put_own", "put_remote", "get_own", "get_remote")


def _percentile(sorted_us, p):
    i = round((len(sorted_us) - 1) * p)
    return sorted_us[min(i, len(sorted_us) - 1)]


def measure(addr: str, own: int, remote: int, rounds: int, window: str = "data") -> dict:
    """Per call, the sorted latencies (µs) of ``rounds`` rounds after a warm-up."""
    channel = grpc.insecure_channel(addr)
    try:
        # An empty HealthCheckRequest (service "") encodes to no bytes.
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        stub = pb_grpc.PldStub(channel)
        data = bytes(8)
        requests = {
            "put_own": pb.PutRequest(rank=own, window=window, offset=0, data=data),
            "put_remote": pb.PutRequest(rank=remote, window=window, offset=0, data=data),
            "get_own": pb.GetRequest(rank=own, window=window, offset=0, len=8),
            "get_remote": pb.GetRequest(rank=remote, window=window, offset=0, len=8),
        }
        calls = {
            "check": lambda: check(b""),
            "put_own": lambda: stub.Put(requests["put_own"]),
            "put_remote": lambda: stub.Put(requests["put_remote"]),
            "get_own": lambda: stub.Get(requests["get_own"]),
            "get_remote": lambda: stub.Get(requests["get_remote"]),
        }
        samples = {c: [] for c in CALLS}
        warmup = rounds // 10
        clock = time.perf_counter_ns
        for r in range(warmup + rounds):
            for c in CALLS:
                t0 = clock()
                calls[c]()
                dt = clock() - t0
                if r >= warmup:
                    samples[c].append(dt / 1000.0)
        for s in samples.values():
            s.sort()
        return samples
    finally:
        channel.close()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m pld_client.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--daemon", required=True, help="HOST:PORT of the daemon's gRPC port")
    ap.add_argument("--own", type=int, default=0, help="the daemon's own rank")
    ap.add_argument("--remote", type=int, default=1, help="the rank of the remote calls")
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--window", default="data")
    ap.add_argument("--tsv", action="store_true", help="print `call median_us p99_us` lines (for pld-bench)")
    args = ap.parse_args(argv)
    samples = measure(args.daemon, args.own, args.remote, args.rounds, args.window)
    floor = _percentile(samples["check"], 0.5)
    for c in CALLS:
        med, p99 = _percentile(samples[c], 0.5), _percentile(samples[c], 0.99)
        if args.tsv:
            print(f"{c}\t{med:.1f}\t{p99:.1f}")
            continue
        print(
            json.dumps(
                {
                    "call": c,
                    "median_us": round(med, 1),
                    "p99_us": round(p99, 1),
                    "median_ratio": round(med / floor, 3),
                    "p99_ratio": round(p99 / floor, 3),
                }
            )
        )


if __name__ == "__main__":
    main()
