"""The Python client of a pld daemon.

A :class:`Client` acts as its daemon's rank: every op is issued by that rank,
to any rank of the cluster, and returns once it is applied at the target
(a get once the bytes are here) — the same completion rules as an embedded
rank (docs/semantics.md).
"""

from __future__ import annotations

import time
from typing import Iterator, Optional, Sequence, Union

import grpc
import numpy as np

from pld_client._proto.pld.v1 import pld_pb2 as pb
from pld_client._proto.pld.v1 import pld_pb2_grpc as pb_grpc
from pld_client._proto.pld.v1 import types_pb2 as types

from pld_client.batch import Batch
from pld_client.wire import (
    _ALGOS,
    _BITS,
    _CMPS,
    _NOTIFY,
    _STREAM_MESSAGE,
    ArrayLike,
    DtypeLike,
    PldError,
    _as_bytes,
    _error,
    _np_dtype,
    _reduce_op,
    _wire_dtype,
)


class Client:
    """A connection to one pld daemon (``pld-daemon --grpc HOST:PORT``).

    ``wait_ready`` seconds are spent waiting for a daemon that is not up,
    or whose peer mesh is not up yet; 0 tries once. ``tls_ca`` (PEM bytes
    of the cluster's ``ca.pem``) talks TLS to a ``--grpc-tls`` daemon;
    ``tls_domain`` is the name its certificate must carry (by default the
    host of ``addr``).
    """

    def __init__(
        self,
        addr: str,
        token: Optional[str] = None,
        wait_ready: float = 30.0,
        tls_ca: Optional[bytes] = None,
        tls_domain: Optional[str] = None,
    ):
        self.addr = addr
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        options = [
            ("grpc.max_receive_message_length", -1),
            ("grpc.max_send_message_length", -1),
        ]
        if tls_ca is not None:
            if tls_domain:
                options.append(("grpc.ssl_target_name_override", tls_domain))
            creds = grpc.ssl_channel_credentials(root_certificates=tls_ca)
            self._channel = grpc.secure_channel(addr, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(addr, options=options)
        self._stub = pb_grpc.PldStub(self._channel)
        deadline = time.monotonic() + wait_ready
        backoff = 0.02
        while True:
            try:
                self.info = self._call(self._stub.Info, pb.InfoRequest(), timeout=5.0)
                if self.info.ready:
                    break
                err = PldError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"rank {self.info.rank} is still connecting to its peers (not ready)",
                    addr,
                )
            except PldError as e:
                if e.code != grpc.StatusCode.UNAVAILABLE:
                    self.close()
                    raise
                err = e
            if time.monotonic() + backoff >= deadline:
                self.close()
                raise err
            time.sleep(backoff)
            backoff = min(backoff * 2, 0.5)
        self.max_data = max(int(self.info.max_message_data), 4096)

    # -- plumbing ---------------------------------------------------------

    def _call(self, method, request, timeout=None):
        try:
            return method(request, metadata=self._metadata, timeout=timeout)
        except grpc.RpcError as e:
            raise _error(e, self.addr) from None

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- who ----------------------------------------------------------------

    @property
    def rank(self) -> int:
        """The daemon's rank."""
        return self.info.rank

    @property
    def nranks(self) -> int:
        """How many ranks the cluster has."""
        return self.info.nranks

    @property
    def windows(self) -> dict:
        """Window name -> size in bytes (the same on every rank)."""
        return {w.name: w.size for w in self.info.windows}

    # -- bytes --------------------------------------------------------------

    def put(self, rank: int, offset: int, data: ArrayLike, window: str = "data") -> None:
        """Writes bytes (or an array's bytes) at byte ``offset`` of ``rank``'s window."""
        raw = _as_bytes(data)
        if len(raw) > self.max_data:
            self._put_stream(pb.PutStreamHeader(rank=rank, window=window, offset=offset, len=len(raw)), raw)
            return
        self._call(self._stub.Put, pb.PutRequest(rank=rank, window=window, offset=offset, data=raw))

    def get(self, rank: int, offset: int, nbytes: int, window: str = "data") -> bytes:
        """Reads ``nbytes`` at byte ``offset`` of ``rank``'s window."""
        if nbytes > self.max_data:
            return self._get_stream(pb.GetStreamRequest(rank=rank, window=window, offset=offset, len=nbytes))
        return self._call(self._stub.Get, pb.GetRequest(rank=rank, window=window, offset=offset, len=nbytes)).data

    # -- arrays -------------------------------------------------------------

    def _region(self, shape: Sequence[int], wire: int, row_stride: Optional[int]) -> "types.Region":
        rows, cols = (1, int(shape[0])) if len(shape) == 1 else (int(shape[0]), int(np.prod(shape[1:])))
        return types.Region(rows=rows, cols=cols, row_stride=row_stride or cols, dtype=wire)

    def put_array(
        self,
        rank: int,
        offset: int,
        array: np.ndarray,
        window: str = "data",
        row_stride: Optional[int] = None,
        dtype: Optional[DtypeLike] = None,
    ) -> None:
        """Writes ``array`` at byte ``offset`` of ``rank``'s window; a 2-D
        array lands as rows ``row_stride`` elements apart (default: packed)."""
        array = np.asarray(array)
        wire = _wire_dtype(dtype if dtype is not None else array.dtype)
        region = self._region(array.shape or (1,), wire, row_stride)
        raw = _as_bytes(array)
        if len(raw) > self.max_data:
            header = pb.PutStreamHeader(rank=rank, window=window, offset=offset, region=region)
            self._put_stream(header, raw)
            return
        self._call(self._stub.Put, pb.PutRequest(rank=rank, window=window, offset=offset, data=raw, region=region))

    def get_array(
        self,
        rank: int,
        offset: int,
        shape: Union[int, Sequence[int]],
        dtype: DtypeLike = np.float32,
        window: str = "data",
        row_stride: Optional[int] = None,
    ) -> np.ndarray:
        """Reads an array of ``shape`` and ``dtype`` at byte ``offset`` of
        ``rank``'s window (rows ``row_stride`` elements apart)."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        npd = _np_dtype(dtype)
        region = self._region(shape, _wire_dtype(dtype), row_stride)
        nbytes = int(np.prod(shape)) * npd.itemsize
        if nbytes > self.max_data:
            raw = self._get_stream(pb.GetStreamRequest(rank=rank, window=window, offset=offset, region=region))
        else:
            raw = self._call(
                self._stub.Get, pb.GetRequest(rank=rank, window=window, offset=offset, region=region)
            ).data
        return np.frombuffer(raw, dtype=npd.newbyteorder("<")).astype(npd, copy=False).reshape(shape)

    def atomic_add(
        self,
        rank: int,
        offset: int,
        array: np.ndarray,
        window: str = "data",
        row_stride: Optional[int] = None,
        dtype: Optional[DtypeLike] = None,
    ) -> None:
        """``window[offset..] += array`` elementwise, atomic per element."""
        array = np.asarray(array)
        wire = _wire_dtype(dtype if dtype is not None else array.dtype)
        region = self._region(array.shape or (1,), wire, row_stride)
        raw = _as_bytes(array)
        if len(raw) > self.max_data:
            header = pb.PutStreamHeader(rank=rank, window=window, offset=offset, region=region, atomic_add=True)
            self._put_stream(header, raw)
            return
        self._call(
            self._stub.AtomicAdd,
            pb.AtomicAddRequest(rank=rank, window=window, offset=offset, dtype=wire, data=raw, region=region),
        )

    def batch(self) -> "Batch":
        """Collects small ops for one call (``Batch.run``): see
        ``pld_client.batch``."""
        return Batch(self)

    # -- cells and signals --------------------------------------------------

    def fetch_add(self, rank: int, offset: int, value: int, dtype: DtypeLike = "int64", window: str = "data") -> int:
        """Atomically adds to one int32/int64 cell; returns the previous value."""
        r = self._call(
            self._stub.FetchAdd,
            pb.FetchAddRequest(rank=rank, window=window, offset=offset, dtype=_wire_dtype(dtype), value=value),
        )
        return r.previous

    def compare_swap(
        self, rank: int, offset: int, expected: int, desired: int, dtype: DtypeLike = "int64", window: str = "data"
    ) -> int:
        """Swaps one int32/int64 cell holding ``expected`` for ``desired``; returns the previous value."""
        r = self._call(
            self._stub.CompareSwap,
            pb.CompareSwapRequest(
                rank=rank, window=window, offset=offset, dtype=_wire_dtype(dtype), expected=expected, desired=desired
            ),
        )
        return r.previous

    def swap(self, rank: int, offset: int, value: int, dtype: DtypeLike = "int64", window: str = "data") -> int:
        """Atomically replaces one int32/int64 cell by ``value``; returns what it held."""
        return self._cell(rank, offset, pb.CELL_OP_KIND_SWAP, value, dtype, window)

    def fetch(self, rank: int, offset: int, dtype: DtypeLike = "int64", window: str = "data") -> int:
        """Atomically reads one int32/int64 cell."""
        return self._cell(rank, offset, pb.CELL_OP_KIND_FETCH, 0, dtype, window)

    def set(self, rank: int, offset: int, value: int, dtype: DtypeLike = "int64", window: str = "data") -> None:
        """Atomically writes ``value`` into one int32/int64 cell."""
        self._cell(rank, offset, pb.CELL_OP_KIND_SET, value, dtype, window)

    def atomic_bitwise(
        self, rank: int, offset: int, op: str, value: int, dtype: DtypeLike = "int64", window: str = "data"
    ) -> None:
        """Atomically applies ``cell = cell <op> value`` (``op``: "and", "or", "xor")."""
        self._cell(rank, offset, pb.CELL_OP_KIND_BITWISE, value, dtype, window, op)

    def fetch_bitwise(
        self, rank: int, offset: int, op: str, value: int, dtype: DtypeLike = "int64", window: str = "data"
    ) -> int:
        """``atomic_bitwise`` that returns what the cell held."""
        return self._cell(rank, offset, pb.CELL_OP_KIND_FETCH_BITWISE, value, dtype, window, op)

    def _cell(self, rank, offset, kind, value, dtype, window, bit: Optional[str] = None) -> int:
        if bit is not None and bit not in _BITS:
            raise PldError(grpc.StatusCode.INVALID_ARGUMENT, f"bitwise op {bit!r} is none of 'and', 'or', 'xor'")
        req = pb.CellOpRequest(
            rank=rank, window=window, offset=offset, dtype=_wire_dtype(dtype), kind=kind, value=value,
            bit_op=_BITS[bit] if bit is not None else 0,
        )
        return self._call(self._stub.CellOp, req).previous

    def put_signal(
        self, rank: int, offset: int, data: bytes, signal_offset: int, signal: int, op: str = "set",
        window: str = "data", signal_window: str = "data",
    ) -> None:
        """Writes ``data`` at ``offset`` of ``rank``, then sets (``op="set"``) or
        adds to (``op="add"``) the 8-byte signal cell at ``signal_offset``: one
        message; whoever sees the signal sees the data."""
        if op not in _NOTIFY:
            raise PldError(grpc.StatusCode.INVALID_ARGUMENT, f"signal op {op!r} is neither 'set' nor 'add'")
        req = pb.PutSignalRequest(
            rank=rank, window=window, offset=offset, data=bytes(data), signal_window=signal_window,
            signal_offset=signal_offset, signal=signal, signal_op=_NOTIFY[op],
        )
        self._call(self._stub.PutSignal, req)

    def notify(self, rank: int, offset: int, value: int, op: str = "set", window: str = "signal") -> None:
        """Sets (``op="set"``) or adds to (``op="add"``) an int32 signal cell of ``rank``."""
        if op not in _NOTIFY:
            raise PldError(grpc.StatusCode.INVALID_ARGUMENT, f"notify op {op!r} is neither 'set' nor 'add'")
        self._call(
            self._stub.Notify, pb.NotifyRequest(rank=rank, window=window, offset=offset, value=value, op=_NOTIFY[op])
        )

    def wait(
        self, offset: int, value: int, cmp: str = "ge", window: str = "signal", timeout: Optional[float] = None
    ) -> int:
        """Waits until this rank's int32 cell satisfies ``cell <cmp> value``;
        returns the value that did. At the timeout (default: the daemon's
        sync timeout) raises DEADLINE_EXCEEDED naming the cell and the last
        value seen."""
        req = pb.WaitRequest(window=window, offset=offset, cmp=self._cmp(cmp), value=value,
                             timeout_ms=int((timeout or 0) * 1000))
        return self._call(self._stub.Wait, req).value

    def test(self, offset: int, value: int, cmp: str = "ge", window: str = "signal") -> bool:
        """Whether this rank's int32 cell satisfies ``cell <cmp> value`` now."""
        req = pb.TestRequest(window=window, offset=offset, cmp=self._cmp(cmp), value=value)
        return self._call(self._stub.Test, req).satisfied

    @staticmethod
    def _cmp(cmp: str) -> int:
        if cmp.lower() not in _CMPS:
            raise PldError(grpc.StatusCode.INVALID_ARGUMENT, f"comparison {cmp!r} is none of {sorted(_CMPS)}")
        return _CMPS[cmp.lower()]

    # -- synchronisation ----------------------------------------------------

    def barrier(self, timeout: Optional[float] = None) -> None:
        """This rank enters a barrier with every rank. At the timeout
        (default: the daemon's) raises DEADLINE_EXCEEDED with the epoch,
        round and the ranks not heard from."""
        self._call(self._stub.Barrier, pb.BarrierRequest(timeout_ms=int((timeout or 0) * 1000)))

    def quiet(self, timeout: Optional[float] = None) -> None:
        """Waits until every op the daemon's rank issued has completed."""
        self._call(self._stub.Quiet, pb.QuietRequest(timeout_ms=int((timeout or 0) * 1000)))

    def stats(self) -> dict:
        """The daemon's counters: ``{(name, kind): value}``."""
        r = self._call(self._stub.Stats, pb.StatsRequest())
        return {(c.name, c.kind): c.value for c in r.counters}

    # -- collectives --------------------------------------------------------
    #
    # Every rank's program makes the same call, in the same order, through
    # its own daemon (as in MPI); the daemons run it among themselves.

    def _collective(self, method, request_type, array, dtype, **fields) -> np.ndarray:
        array = np.asarray(array)
        wire = _wire_dtype(dtype if dtype is not None else array.dtype)
        npd = _np_dtype(dtype if dtype is not None else array.dtype)
        r = self._call(method, request_type(dtype=wire, data=_as_bytes(array.astype(npd, copy=False)), **fields))
        return np.frombuffer(r.data, dtype=npd.newbyteorder("<")).astype(npd, copy=False)

    def all_reduce(self, array, op: str = "sum", algo: str = "ring", dtype: Optional[DtypeLike] = None) -> np.ndarray:
        """Every rank ends with the elementwise ``op`` (sum, max, min, prod)
        of every rank's array; ``algo`` is "ring" or "mesh"."""
        return self._collective(
            self._stub.AllReduce, pb.AllReduceRequest, array, dtype, op=_reduce_op(op), algo=_ALGOS[algo]
        ).reshape(np.shape(array))

    def broadcast(self, array, root: int = 0, dtype: Optional[DtypeLike] = None) -> np.ndarray:
        """Every rank ends with ``root``'s array (the others give the shape)."""
        return self._collective(self._stub.Broadcast, pb.BroadcastRequest, array, dtype, root=root).reshape(
            np.shape(array)
        )

    def all_gather(self, array, dtype: Optional[DtypeLike] = None) -> np.ndarray:
        """Every rank ends with every rank's array, stacked by rank."""
        out = self._collective(self._stub.AllGather, pb.AllGatherRequest, array, dtype)
        return out.reshape((self.nranks,) + np.shape(array))

    def reduce_scatter(self, array, op: str = "sum", dtype: Optional[DtypeLike] = None) -> np.ndarray:
        """The array is nranks equal blocks; rank r ends with block r of the
        elementwise ``op`` of every rank's array."""
        return self._collective(self._stub.ReduceScatter, pb.ReduceScatterRequest, array, dtype, op=_reduce_op(op))

    def all_to_all(self, array, dtype: Optional[DtypeLike] = None) -> np.ndarray:
        """The array is nranks equal blocks; block j goes to rank j, and each
        rank ends with the blocks it was sent, by sender."""
        return self._collective(self._stub.AllToAll, pb.AllToAllRequest, array, dtype)

    # -- streams ------------------------------------------------------------

    def _put_stream(self, header, raw: bytes) -> None:
        def messages() -> Iterator:
            yield pb.PutStreamRequest(header=header)
            view = memoryview(raw)
            # 1 MiB messages, or the daemon's limit if that is smaller.
            step = max(1, min(_STREAM_MESSAGE, self.max_data))
            for at in range(0, len(raw), step):
                yield pb.PutStreamRequest(data=bytes(view[at : at + step]))

        self._call(self._stub.PutStream, messages())

    def _get_stream(self, request) -> bytes:
        try:
            parts = [m.data for m in self._stub.GetStream(request, metadata=self._metadata)]
        except grpc.RpcError as e:
            raise _error(e, self.addr) from None
        return b"".join(parts)
