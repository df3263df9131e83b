"""Errors a program can match on: each kind of daemon error arrives with a
``google.rpc.ErrorInfo`` that ``PldError`` exposes as ``reason``,
``metadata`` and ``field``."""

import grpc
import pytest

from conftest import Cluster
from pld_client import Client, PldError

SIZE = 32 << 20  # the test cluster's data window


def test_each_kind_of_error_carries_its_reason_and_values(cluster2):
    c = Client(cluster2.grpc[0])
    with pytest.raises(PldError) as e:
        c.put(1, SIZE - 2, b"abc")
    assert e.value.code == grpc.StatusCode.OUT_OF_RANGE
    assert e.value.reason == "OUT_OF_BOUNDS"
    m = e.value.metadata
    assert (m["op"], m["rank"], m["window"]) == ("put", "1", "data")
    assert (int(m["offset"]), int(m["len"]), int(m["size"])) == (SIZE - 2, 3, SIZE)

    with pytest.raises(PldError) as e:
        c.put(7, 0, b"x")
    assert e.value.reason == "NO_SUCH_RANK"
    assert (e.value.metadata["rank"], e.value.metadata["nranks"]) == ("7", "2")

    with pytest.raises(PldError) as e:
        c.atomic_add(1, 2, [1.0, 2.0], dtype="fp32")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.reason == "INVALID_GEOMETRY"
    assert e.value.field == "offset"
    assert e.value.metadata["call"] == "AtomicAdd"

    with pytest.raises(PldError) as e:
        c.wait(8, 5, cmp="eq", timeout=0.3)
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert e.value.reason == "WAIT_TIMEOUT"
    m = e.value.metadata
    assert (m["window"], m["offset"], m["expected"], m["last"]) == ("signal", "8", "5", "0")

    with pytest.raises(PldError) as e:
        c.barrier(timeout=0.5)
    assert e.value.reason == "BARRIER_TIMEOUT"
    assert e.value.metadata["epoch"] == "1"
    assert e.value.ranks("missing") == [1]
    c.close()


def test_a_lost_peer_and_a_missing_token_carry_theirs():
    # TCP: the peer's death is seen at once (QUIC waits for its idle timeout).
    c = Cluster(2, transport="tcp")
    try:
        cl = Client(c.grpc[0])
        c.procs[1].kill()
        c.procs[1].wait()
        with pytest.raises(PldError) as e:
            cl.put(1, 0, b"gone")
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
        assert e.value.reason == "PEER_LOST"
        assert e.value.metadata["rank"] == "1"
        cl.close()
    finally:
        c.stop()
    t = Cluster(1, extra=("--client-token", "s3cret"))
    try:
        with pytest.raises(PldError) as e:
            Client(t.grpc[0], wait_ready=0)
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
        assert e.value.reason == "UNAUTHENTICATED"
    finally:
        t.stop()
