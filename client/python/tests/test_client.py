"""pld-client against real daemons: data moves, atomics add up, signals
and barriers synchronise, and every documented error code comes back."""

import subprocess
import sys
import threading
from pathlib import Path

import grpc
import numpy as np
import pytest

from pld_client import Client, PldError

from conftest import Cluster

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ring_shift.py"


def test_info_names_rank_windows_and_readiness(cluster2):
    with Client(cluster2.grpc[1]) as c:
        assert (c.rank, c.nranks) == (1, 2)
        assert c.windows == {"data": 32 << 20, "signal": 64 << 10, "collective": 4 << 20}
        assert c.info.ready and c.info.transport == "quic"


def test_bytes_and_arrays_round_trip_between_ranks(cluster2):
    a, b = Client(cluster2.grpc[0]), Client(cluster2.grpc[1])
    a.put(1, 64, b"hello pld")
    assert b.get(1, 64, 9) == b"hello pld"
    x = np.arange(12, dtype=np.float16).reshape(3, 4)
    a.put_array(1, 1024, x, row_stride=10)  # three rows, 10 elements apart
    assert np.array_equal(b.get_array(1, 1024, (3, 4), np.float16, row_stride=10), x)
    # The gaps between the rows were not touched.
    gap = b.get_array(1, 1024 + 8, (6,), np.float16)
    assert not gap.any()


def test_arrays_larger_than_one_message_stream(cluster2):
    c = Client(cluster2.grpc[0])
    assert c.max_data == 4 << 20
    x = np.random.default_rng(7).standard_normal((1536, 1024)).astype(np.float32)  # 6 MiB
    c.put_array(1, 0, x)
    assert np.array_equal(c.get_array(1, 0, x.shape, np.float32), x)
    raw = np.random.default_rng(8).integers(0, 255, 9 << 20, dtype=np.uint8).tobytes()
    c.put(0, 0, raw)
    assert c.get(0, 0, len(raw)) == raw


def test_atomic_adds_from_every_rank_lose_nothing(cluster4):
    clients = [Client(a) for a in cluster4.grpc]
    base = 4 << 20
    clients[0].put_array(2, base, np.zeros(256, np.int32))
    ones = np.ones(256, np.int32)

    def adder(c):
        for _ in range(25):
            c.atomic_add(2, base, ones)

    threads = [threading.Thread(target=adder, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = clients[3].get_array(2, base, (256,), np.int32)
    assert (got == 100).all(), got[:8]
    before = clients[1].fetch_add(0, 8 << 20, 5, dtype="int64")
    assert clients[2].fetch_add(0, 8 << 20, 1, dtype="int64") == before + 5
    assert clients[0].compare_swap(0, 8 << 20, before + 6, 42) == before + 6
    assert clients[0].get_array(0, 8 << 20, (1,), np.int64)[0] == 42


def test_openshmem_cell_ops_and_put_signal_from_every_rank(cluster2):
    a, b = Client(cluster2.grpc[0]), Client(cluster2.grpc[1])
    base = 12 << 20
    # Each rank sets its bit in rank 0's cell, seeing it clear before.
    for i, c in enumerate((a, b)):
        before = c.fetch_bitwise(0, base, "or", 1 << i)
        assert not before & (1 << i)
    assert a.fetch(0, base) == 0b11
    a.atomic_bitwise(0, base, "and", 0b01)
    assert b.fetch(0, base) == 0b01
    assert b.swap(0, base, -9) == 0b01
    a.set(1, base + 8, 7, dtype="int32")
    assert a.fetch(1, base + 8, dtype="int32") == 7
    # put_signal: the data and the signal together.
    b.put_signal(0, base + 4096, b"signalled data", base + 64, 3, op="add")
    assert a.get(0, base + 4096, 14) == b"signalled data"
    assert a.fetch(0, base + 64) == 3
    with pytest.raises(PldError) as e:
        a.atomic_bitwise(0, base, "nand", 1)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(PldError) as e:
        a.swap(0, base + 4, 1)  # not 8-byte aligned for an int64 cell
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_notify_wakes_a_wait_and_test_sees_it(cluster2):
    a, b = Client(cluster2.grpc[0]), Client(cluster2.grpc[1])
    b.notify(1, 0, 0)
    assert not b.test(0, 1, "ge")
    waiter = {}
    t = threading.Thread(target=lambda: waiter.setdefault("v", b.wait(0, 3, "ge", timeout=10)))
    t.start()
    for _ in range(3):
        a.notify(1, 0, 1, op="add")
    t.join()
    assert waiter["v"] == 3
    assert b.test(0, 3, "eq")


def test_barrier_orders_the_seed_store_ring(cluster4):
    clients = [Client(a) for a in cluster4.grpc]
    n, off = len(clients), 12 << 20
    out = {}

    def rank(c):
        r = c.rank
        c.put_array((r + 1) % n, off, np.full(64, r, np.int32))
        c.barrier()
        out[r] = c.get_array(r, off, (64,), np.int32)
        c.barrier()

    threads = [threading.Thread(target=rank, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in range(n):
        assert (out[r] == (r - 1) % n).all()


@pytest.mark.parametrize("mode", ["load", "store"])
def test_ring_shift_example_prints_ok(cluster4, mode):
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), "--daemons", ",".join(cluster4.grpc), "--mode", mode],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "OK"


def code_of(fn):
    with pytest.raises(PldError) as e:
        fn()
    return e.value.code, e.value.message


def test_bad_requests_get_the_documented_codes(cluster2):
    c = Client(cluster2.grpc[0])
    code, msg = code_of(lambda: c.get(1, (32 << 20) - 4, 8))
    assert code == grpc.StatusCode.OUT_OF_RANGE and "window 'data'" in msg
    code, msg = code_of(lambda: c.get(1, 0, 8, window="nope"))
    assert code == grpc.StatusCode.NOT_FOUND and "nope" in msg
    code, msg = code_of(lambda: c.put(5, 0, b"x"))
    assert code == grpc.StatusCode.NOT_FOUND and "rank 5" in msg
    code, msg = code_of(lambda: c.atomic_add(1, 2, np.ones(4, np.float32)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "offset 2" in msg
    code, msg = code_of(lambda: c.fetch_add(1, 0, 1, dtype="fp32"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    code, msg = code_of(lambda: c.wait(4, 1, "eq", timeout=0.3))
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "signal" in msg and "4" in msg, msg
    # The daemon kept serving.
    c.put(1, 0, b"still here")
    assert c.get(1, 0, 10) == b"still here"


def test_a_token_is_required_when_set():
    cl = Cluster(2, extra=["--client-token", "s3cret"])
    try:
        code, msg = code_of(lambda: Client(cl.grpc[0], wait_ready=0))
        assert code == grpc.StatusCode.UNAUTHENTICATED, msg
        code, _ = code_of(lambda: Client(cl.grpc[0], token="wrong", wait_ready=0))
        assert code == grpc.StatusCode.UNAUTHENTICATED
        with Client(cl.grpc[0], token="s3cret") as c:
            c.put(1, 0, b"ok")
            assert c.get(1, 0, 2) == b"ok"
    finally:
        cl.stop()


def test_collectives_run_across_the_daemons(cluster4):
    clients = [Client(a) for a in cluster4.grpc]
    xs = [np.arange(8, dtype=np.float32) + 10 * r for r in range(4)]
    results = [None] * 4

    def body(r):
        c = clients[r]
        results[r] = (
            c.all_reduce(xs[r]),
            c.all_reduce(xs[r], op="max", algo="mesh"),
            c.broadcast(xs[r], root=3),
            c.all_gather(xs[r]),
            c.reduce_scatter(xs[r], op="sum"),
            c.all_to_all(xs[r]),
        )

    threads = [threading.Thread(target=body, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    total = sum(xs)
    for r in range(4):
        s, m, b, g, rs, a2a = results[r]
        assert np.array_equal(s, total)
        assert np.array_equal(m, xs[3])
        assert np.array_equal(b, xs[3])
        assert np.array_equal(g, np.stack(xs))
        assert np.array_equal(rs, total[2 * r : 2 * r + 2])
        assert np.array_equal(a2a, np.concatenate([x[2 * r : 2 * r + 2] for x in xs]))
    with pytest.raises(PldError) as e:
        clients[0].all_reduce(xs[0], op="mean")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_reflection_answers_in_v1_and_v1alpha(cluster2):
    """grpcio-reflection speaks v1alpha; grpcurl and newer tools speak v1.
    The two versions' messages are the same on the wire, so v1alpha's
    classes also drive the v1 method."""
    from grpc_reflection.v1alpha import reflection_pb2 as refl

    channel = grpc.insecure_channel(cluster2.grpc[0])
    try:
        for service in ("grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"):
            info = channel.stream_stream(
                f"/{service}/ServerReflectionInfo",
                request_serializer=refl.ServerReflectionRequest.SerializeToString,
                response_deserializer=refl.ServerReflectionResponse.FromString,
            )
            answers = list(info(iter([refl.ServerReflectionRequest(list_services="")]), timeout=10))
            names = [s.name for s in answers[0].list_services_response.service]
            assert "pld.v1.Pld" in names, (service, names)
            assert "grpc.health.v1.Health" in names, (service, names)
    finally:
        channel.close()


def test_streams_follow_a_small_message_limit():
    c = Cluster(2, extra=("--grpc-max-message", "64KiB"))
    try:
        with Client(c.grpc[0]) as cl:
            assert cl.max_data == 64 << 10
            blob = bytes(range(256)) * 4097
            cl.put(1, 0, blob)
            assert cl.get(1, 0, len(blob)) == blob
    finally:
        c.stop()
