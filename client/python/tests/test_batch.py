"""Batch: many small ops in one call against real daemons — applied in
order, each answered with its own result, a refused op failing alone with
its own code and index while the ops around it complete."""

import grpc
import numpy as np
import pytest

from pld_client import Client, PldBatchError, PldError

from conftest import Cluster  # noqa: F401  (the fixtures' home)


def test_a_batch_applies_its_ops_in_order_and_returns_each_result(cluster2):
    a, b = Client(cluster2.grpc[0]), Client(cluster2.grpc[1])
    batch = a.batch()
    for i in range(200):
        batch.put(1, 4096, np.uint32(i).tobytes())  # the last one must win
        batch.put(1, 8192 + 4 * i, np.uint32(i).tobytes())
    batch.fetch_add(1, 16384, 5).fetch_add(1, 16384, 7)
    batch.compare_swap(1, 16392, 0, 9)
    batch.atomic_add(1, 16400, np.array([1.5, 2.5], np.float32))
    batch.notify(1, 0, 3, op="add")
    batch.get(1, 4096, 4)
    results = batch.run()
    assert len(results) == 406
    assert results[:400] == [None] * 400
    assert results[400:403] == [0, 5, 0]  # previous values, in order
    assert results[403:405] == [None, None]
    assert results[405] == np.uint32(199).tobytes()
    assert np.array_equal(
        np.frombuffer(b.get(1, 8192, 800), np.uint32), np.arange(200, dtype=np.uint32)
    )
    assert np.frombuffer(b.get(1, 16384, 8), np.int64)[0] == 12
    assert np.frombuffer(b.get(1, 16392, 8), np.int64)[0] == 9
    assert np.array_equal(np.frombuffer(b.get(1, 16400, 8), np.float32), [1.5, 2.5])
    assert b.test(0, 3, "ge")


def test_a_refused_op_fails_alone_naming_its_index(cluster2):
    a = Client(cluster2.grpc[0])
    size = a.windows["data"]
    batch = a.batch().put(1, 0, b"good").put(1, size - 2, b"past the end").get(1, 0, 4)
    batch.fetch_add(1, 3, 1)  # misaligned
    with pytest.raises(PldBatchError) as e:
        batch.run()
    errs = e.value.errors
    assert sorted(errs) == [1, 3]
    assert errs[1].code == grpc.StatusCode.OUT_OF_RANGE
    assert errs[1].message.startswith("op 1: ")
    assert errs[3].code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.results[2] == b"good", "the ops around a refused one complete"
    assert Client(cluster2.grpc[1]).get(1, size - 16, 16) == bytes(16), "nothing past the end"


def test_a_batch_of_too_many_ops_is_refused_whole(cluster2):
    a = Client(cluster2.grpc[0])
    batch = a.batch()
    for _ in range(65_537):
        batch.notify(1, 0, 1)
    # Refused by the daemon before any op runs: the call's error, not a
    # batch of op errors.
    with pytest.raises(PldError) as e:
        batch.run()
    assert not isinstance(e.value, PldBatchError), e.value
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert "Batch: 65537 ops exceed the limit of 65536" in str(e.value)
