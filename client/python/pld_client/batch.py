"""Many small ops in one call: ``Client.batch()``.

>>> b = client.batch()                       # doctest: +SKIP
>>> b.put(1, 0, b"abcd").fetch_add(1, 64, 1).get(1, 0, 4)  # doctest: +SKIP
>>> b.run()                                  # doctest: +SKIP
[None, 41, b'abcd']

The daemon issues the ops back to back in this order (to one target they
are applied in it, and share writes and acknowledgements on the peer
plane) and answers once all have completed. Each op succeeds or fails on
its own: ``run`` returns one result per op (``None``, the bytes of a get,
the previous value of a fetch_add or compare_swap) or raises
``PldBatchError`` naming every op that failed, with the results of the
others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Union

import grpc
import numpy as np

from pld_client._proto.pld.v1 import pld_pb2 as pb
from pld_client.wire import _NOTIFY, PldError, _as_bytes, _wire_dtype

if TYPE_CHECKING:  # pragma: no cover
    from pld_client.client import Client

Result = Union[None, bytes, int]


class PldBatchError(Exception):
    """Some ops of a batch failed. ``errors`` maps each failed op's index
    to its ``PldError``; ``results`` holds every op's result (``None`` at a
    failed op's index)."""

    def __init__(self, errors: dict, results: List[Result]):
        first = min(errors)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{errors[first]}{more}")
        self.errors = errors
        self.results = results


class Batch:
    """Ops collected for one ``Batch`` call; each method returns the batch."""

    def __init__(self, client: "Client"):
        self._client = client
        self._ops: list = []
        self._kinds: list = []

    def __len__(self) -> int:
        return len(self._ops)

    def _add(self, kind: str, op) -> "Batch":
        self._ops.append(pb.BatchOp(**{kind: op}))
        self._kinds.append(kind)
        return self

    def put(self, rank: int, offset: int, data, window: str = "data") -> "Batch":
        return self._add("put", pb.PutRequest(rank=rank, window=window, offset=offset, data=_as_bytes(data)))

    def get(self, rank: int, offset: int, nbytes: int, window: str = "data") -> "Batch":
        return self._add("get", pb.GetRequest(rank=rank, window=window, offset=offset, len=nbytes))

    def atomic_add(self, rank: int, offset: int, array, window: str = "data", dtype=None) -> "Batch":
        array = np.asarray(array)
        wire = _wire_dtype(dtype if dtype is not None else array.dtype)
        req = pb.AtomicAddRequest(rank=rank, window=window, offset=offset, dtype=wire, data=_as_bytes(array))
        return self._add("atomic_add", req)

    def fetch_add(self, rank: int, offset: int, value: int, dtype="int64", window: str = "data") -> "Batch":
        req = pb.FetchAddRequest(rank=rank, window=window, offset=offset, dtype=_wire_dtype(dtype), value=value)
        return self._add("fetch_add", req)

    def compare_swap(
        self, rank: int, offset: int, expected: int, desired: int, dtype="int64", window: str = "data"
    ) -> "Batch":
        req = pb.CompareSwapRequest(
            rank=rank, window=window, offset=offset, dtype=_wire_dtype(dtype), expected=expected, desired=desired
        )
        return self._add("compare_swap", req)

    def notify(self, rank: int, offset: int, value: int, op: str = "set", window: str = "signal") -> "Batch":
        if op not in _NOTIFY:
            raise PldError(grpc.StatusCode.INVALID_ARGUMENT, f"notify op {op!r} is neither 'set' nor 'add'")
        req = pb.NotifyRequest(rank=rank, window=window, offset=offset, value=value, op=_NOTIFY[op])
        return self._add("notify", req)

    def run(self, timeout: Optional[float] = None) -> List[Result]:
        """Sends the batch; one result per op, in order (see the module)."""
        c = self._client
        reply = c._call(c._stub.Batch, pb.BatchRequest(ops=self._ops), timeout)
        results: List[Result] = []
        errors = {}
        for i, (kind, r) in enumerate(zip(self._kinds, reply.results)):
            if r.code != 0:
                errors[i] = PldError(_status(r.code), r.message, c.addr)
                results.append(None)
            elif kind == "get":
                results.append(bytes(r.data))
            elif kind in ("fetch_add", "compare_swap"):
                results.append(int(r.previous))
            else:
                results.append(None)
        if errors:
            raise PldBatchError(errors, results)
        return results


def _status(code: int) -> grpc.StatusCode:
    """The grpc.StatusCode of a numeric code."""
    for s in grpc.StatusCode:
        if s.value[0] == code:
            return s
    return grpc.StatusCode.UNKNOWN
