"""Every error reason a gRPC client can meet (docs/client.md, "Errors a
program can match on"), each produced by a real request to real daemons and
matched on ``PldError.reason`` and ``.code``, as a program would — the same
set as ``client/tests/reasons.rs``."""

import os
import signal
import subprocess
import tempfile
import threading
import time

import grpc
import pytest

from conftest import pause, Cluster, daemon_bin, free_ports
from pld_client import Client, PldError
from pld_client._proto.pld.v1 import pld_pb2 as pb
from pld_client._proto.pld.v1 import pld_pb2_grpc as pb_grpc
from pld_client.client import _error

DATA = 32 << 20  # the test clusters' data window


def reason_of(call):
    with pytest.raises(PldError) as e:
        call()
    return e.value.reason, e.value.code


C = grpc.StatusCode


def test_every_reason_of_a_bad_request(cluster2):
    c = Client(cluster2.grpc[0])
    try:
        assert reason_of(lambda: c.put(1, DATA, b"x")) == ("OUT_OF_BOUNDS", C.OUT_OF_RANGE)
        assert reason_of(lambda: c.fetch_add(1, 4, 1)) == ("MISALIGNED_OFFSET", C.INVALID_ARGUMENT)
        assert reason_of(lambda: c.fetch_add(1, 0, 1, dtype="fp32")) == ("UNSUPPORTED_DTYPE", C.INVALID_ARGUMENT)
        assert reason_of(lambda: c.fetch_add(1, 0, 1 << 40, dtype="int32")) == ("VALUE_OUT_OF_RANGE", C.INVALID_ARGUMENT)
        assert reason_of(lambda: c.atomic_add(1, 2, [1.0, 2.0], dtype="fp32")) == ("INVALID_GEOMETRY", C.INVALID_ARGUMENT)
        no_dtype = pb.FetchAddRequest(rank=1, window="data", offset=0, dtype=0, value=1)
        assert reason_of(lambda: c._call(c._stub.FetchAdd, no_dtype)) == ("INVALID_ARGUMENT", C.INVALID_ARGUMENT)

        def short_stream():
            yield pb.PutStreamRequest(header=pb.PutStreamHeader(rank=1, window="data", offset=0, len=100), data=b"x" * 60)

        assert reason_of(lambda: c._call(c._stub.PutStream, short_stream())) == ("STREAM_LENGTH", C.INVALID_ARGUMENT)
        assert reason_of(lambda: c.put(7, 0, b"x")) == ("NO_SUCH_RANK", C.NOT_FOUND)
        assert reason_of(lambda: c.get(0, 0, 1, window="nope")) == ("NO_SUCH_WINDOW", C.NOT_FOUND)
        big = pb.GetRequest(rank=0, window="data", offset=0, len=8 << 20)
        assert reason_of(lambda: c._call(c._stub.Get, big)) == ("TOO_LARGE", C.RESOURCE_EXHAUSTED)
        # The collective window is 4 MiB: 2 MiB from each of 2 ranks, and
        # the agreement's slots, do not fit.
        assert reason_of(lambda: c.all_gather(bytearray(2 << 20), dtype="int8")) == ("SCRATCH_TOO_SMALL", C.RESOURCE_EXHAUSTED)
        assert reason_of(lambda: c.barrier(timeout=0.3)) == ("BARRIER_TIMEOUT", C.DEADLINE_EXCEEDED)
        assert reason_of(lambda: c.wait(0, 9, cmp="eq", timeout=0.3)) == ("WAIT_TIMEOUT", C.DEADLINE_EXCEEDED)
        # The barrier left pending resumes with rank 1.
        other = Client(cluster2.grpc[1])
        t = threading.Thread(target=other.barrier)
        t.start()
        c.barrier()
        t.join()
        other.close()
    finally:
        c.close()


def running(metrics_addr):
    """The daemon's pld_grpc_calls_running gauge."""
    import urllib.request

    body = urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=5).read().decode()
    line = next(ln for ln in body.splitlines() if ln.startswith("pld_grpc_calls_running{"))
    return int(line.rsplit(" ", 1)[1])


def test_every_reason_of_a_rank_in_trouble():
    n = 2
    ports = free_ports(2 * n)
    peers = ",".join(f"127.0.0.1:{p}" for p in ports[:n])
    grpc_addr = [f"127.0.0.1:{p}" for p in ports[n:]]
    tls = tempfile.mkdtemp(prefix="pld-py-reasons-")
    subprocess.run([daemon_bin(), "certs", "--ranks", str(n), "--out", tls], check=True, stdout=subprocess.DEVNULL)

    metrics = f"127.0.0.1:{free_ports(1)[0]}"

    def spawn(r):
        cmd = [daemon_bin(), "--rank", str(r), "--peers", peers, "--transport", "tcp", "--tls-dir", tls,
               "--grpc", grpc_addr[r], "--op-timeout", "1s"]
        if r == 0:
            cmd += ["--metrics", metrics]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def line(p, has):
        for ln in p.stdout:
            if has in ln:
                return
        raise RuntimeError(f"the daemon exited before '{has}'")

    procs = [spawn(0)]
    try:
        line(procs[0], "gRPC on")
        # Rank 1 is not up yet: rank 0 answers, and says it is not ready.
        # (Client() itself waits for a ready daemon: the raw stub here.)
        channel = grpc.insecure_channel(grpc_addr[0])
        stub = pb_grpc.PldStub(channel)

        def early_put():
            try:
                stub.Put(pb.PutRequest(rank=0, window="data", offset=0, data=b"x"), timeout=10)
            except grpc.RpcError as e:
                raise _error(e, grpc_addr[0]) from None

        assert reason_of(early_put) == ("NOT_READY", C.UNAVAILABLE)
        channel.close()
        procs.append(spawn(1))
        for p in procs:
            line(p, " ready on ")
        c = Client(grpc_addr[0])
        # Rank 1 stops answering: an op to it times out, and a quiet while
        # that op is outstanding times out too.
        pause(procs[1].pid)
        before = c.stats().get(("ops_issued", "put"), 0)
        got = {}

        def put():
            got["put"] = reason_of(lambda: c.put(1, 0, b"late"))

        t = threading.Thread(target=put)
        t.start()
        while c.stats().get(("ops_issued", "put"), 0) == before:
            time.sleep(0.01)
        assert reason_of(lambda: c.quiet(timeout=0.3)) == ("QUIET_TIMEOUT", C.DEADLINE_EXCEEDED)
        t.join()
        assert got["put"] == ("OP_TIMEOUT", C.DEADLINE_EXCEEDED)
        os.kill(procs[1].pid, signal.SIGCONT)
        # Rank 1 dies: an op to it is lost, at once over TCP.
        procs[1].kill()
        procs[1].wait()
        assert reason_of(lambda: c.put(1, 0, b"gone")) == ("PEER_LOST", C.UNAVAILABLE)
        # Rank 0 is asked to stop: a wait nobody satisfies ends saying so.
        waited = {}

        def wait():
            waited["w"] = reason_of(lambda: c.wait(0, 7, cmp="eq", timeout=60))

        t = threading.Thread(target=wait)
        t.start()
        # Once the daemon holds the wait (its calls_running gauge says so).
        while running(metrics) < 1:
            time.sleep(0.01)
        procs[0].send_signal(signal.SIGTERM)
        t.join(timeout=30)
        assert waited["w"] == ("SHUTTING_DOWN", C.UNAVAILABLE)
        assert procs[0].wait(timeout=20) == 0
        c.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_strict_checked_mode_and_mismatched_collectives():
    c = Cluster(2, extra=("--checked=strict",))
    try:
        a, b = Client(c.grpc[0]), Client(c.grpc[1])
        a.put(1, 0, b"12345678")
        # Rank 1 reads its own bytes that rank 0 just put: its own access.
        assert reason_of(lambda: b.get(1, 0, 8)) == ("RACE", C.FAILED_PRECONDITION)
        a.put(0, 64, b"12345678")
        # A peer's racing read, refused at its target.
        assert reason_of(lambda: b.get(0, 64, 8)) == ("REJECTED", C.FAILED_PRECONDITION)
        got = {}

        def call(cl, n, k):
            got[k] = reason_of(lambda: cl.all_reduce([1.0] * n, dtype="fp32"))

        ts = [threading.Thread(target=call, args=(a, 6, 0)), threading.Thread(target=call, args=(b, 12, 1))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert got[0] == got[1] == ("COLLECTIVE_MISMATCH", C.FAILED_PRECONDITION)
        a.close()
        b.close()
    finally:
        c.stop()


def test_a_stalled_put_stream_is_stalled():
    c = Cluster(1, extra=("--grpc-stall-timeout", "1s"))
    try:
        cl = Client(c.grpc[0])

        def stalled():
            yield pb.PutStreamRequest(header=pb.PutStreamHeader(rank=0, window="data", offset=0, len=1 << 20), data=b"x" * 1000)
            time.sleep(5)  # the client goes quiet past the stall timeout

        assert reason_of(lambda: cl._call(cl._stub.PutStream, stalled())) == ("STALLED", C.DEADLINE_EXCEEDED)
        cl.close()
    finally:
        c.stop()


def test_no_collective_window_and_a_stream_that_does_not_decode():
    c = Cluster(1, windows=("data=1MiB",))
    try:
        cl = Client(c.grpc[0])
        with pytest.raises(PldError) as e:
            cl.all_reduce([1.0], dtype="fp32")
        assert (e.value.reason, e.value.code) == ("NO_COLLECTIVE_WINDOW", C.FAILED_PRECONDITION)
        assert e.value.metadata["call"] == "AllReduce"

        # A second message whose window name is not UTF-8 (field 1, the
        # header, holding field 2, the window): the client's stream fails.
        first = pb.PutStreamRequest(header=pb.PutStreamHeader(rank=0, window="data", len=16), data=b"\x01" * 8)
        header = b"\x12\x02\xff\xfe"
        second = b"\x0a" + bytes([len(header)]) + header + b"\x12\x08" + b"\x02" * 8
        channel = grpc.insecure_channel(c.grpc[0])
        put_stream = channel.stream_unary("/pld.v1.Pld/PutStream", request_serializer=lambda m: m, response_deserializer=pb.PutResponse.FromString)
        assert reason_of(lambda: cl._call(put_stream, iter([first.SerializeToString(), second]))) == ("CLIENT_STREAM", C.INVALID_ARGUMENT)
        channel.close()
        assert len(cl.get(0, 0, 8)) == 8  # the daemon serves on
        cl.close()
    finally:
        c.stop()
