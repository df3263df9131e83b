"""What the Python client and its batches share: the element types and
op names of the wire, the conversions of numpy data, and ``PldError``
with the daemon's details. Imported by ``client`` and ``batch``, and
importing neither.
"""

from __future__ import annotations

from typing import Optional, Union

import grpc
import numpy as np

from pld_client._proto.pld.v1 import pld_pb2 as pb
from pld_client._proto.pld.v1 import types_pb2 as types

#: numpy dtypes and their pld element types. bf16 has no numpy dtype: pass
#: ``dtype="bf16"`` with uint16 arrays that hold the bit patterns.
DTYPES = {
    np.dtype(np.float32): types.DTYPE_FP32,
    np.dtype(np.float16): types.DTYPE_FP16,
    np.dtype(np.int32): types.DTYPE_INT32,
    np.dtype(np.int16): types.DTYPE_INT16,
    np.dtype(np.int8): types.DTYPE_INT8,
    np.dtype(np.int64): types.DTYPE_INT64,
    np.dtype(np.float64): types.DTYPE_FP64,
}
_NAMES = {
    "fp32": types.DTYPE_FP32,
    "fp16": types.DTYPE_FP16,
    "bf16": types.DTYPE_BF16,
    "int32": types.DTYPE_INT32,
    "int16": types.DTYPE_INT16,
    "int8": types.DTYPE_INT8,
    "int64": types.DTYPE_INT64,
    "fp64": types.DTYPE_FP64,
}
_CMPS = {
    "eq": types.CMP_EQ,
    "ne": types.CMP_NE,
    "gt": types.CMP_GT,
    "ge": types.CMP_GE,
    "lt": types.CMP_LT,
    "le": types.CMP_LE,
}
_NOTIFY = {"set": types.NOTIFY_OP_SET, "add": types.NOTIFY_OP_ATOMIC_ADD}
_BITS = {"and": types.BIT_OP_AND, "or": types.BIT_OP_OR, "xor": types.BIT_OP_XOR}
_REDUCE = {"sum": pb.REDUCE_OP_SUM, "max": pb.REDUCE_OP_MAX, "min": pb.REDUCE_OP_MIN, "prod": pb.REDUCE_OP_PROD}
_ALGOS = {"ring": pb.ALGO_RING, "mesh": pb.ALGO_MESH}

#: Data bytes per streamed message.
_STREAM_MESSAGE = 1 << 20
#: What a message may hold beyond its data.
_OVERHEAD = 64 << 10

ArrayLike = Union[np.ndarray, bytes, bytearray, memoryview]
DtypeLike = Union[str, np.dtype, type]


class PldError(Exception):
    """A call the daemon (or this client) refused.

    ``code`` is the ``grpc.StatusCode``: INVALID_ARGUMENT, OUT_OF_RANGE,
    NOT_FOUND, UNAVAILABLE, DEADLINE_EXCEEDED, UNAUTHENTICATED, ...
    ``message`` is the daemon's explanation. What the message names comes
    structured too, from the ``google.rpc.ErrorInfo`` the daemon attaches:
    ``reason`` (``OUT_OF_BOUNDS``, ``PEER_LOST``, ``BARRIER_TIMEOUT``, ...;
    docs/client.md lists them) and ``metadata`` (``rank``, ``op``, ``window``,
    ``offset``, ``epoch``, ``missing``, ...; strings), and ``field`` for a
    malformed request. They are ``None`` / empty when the daemon sent none.
    """

    def __init__(self, code: grpc.StatusCode, message: str, addr: str = "",
                 reason: Optional[str] = None, metadata: Optional[dict] = None,
                 field: Optional[str] = None):
        super().__init__(f"{message} [{code.name}]" + (f" (daemon {addr})" if addr else ""))
        self.code = code
        self.message = message
        self.addr = addr
        self.reason = reason
        self.metadata = dict(metadata or {})
        self.field = field

    def ranks(self, key: str) -> list:
        """A metadata entry that lists ranks (``missing``, ``unreachable``)."""
        return [int(r) for r in self.metadata.get(key, "").split(",") if r]


def _details(err: grpc.RpcError):
    """The reason, metadata and field of a daemon's structured error
    details (google.rpc.Status in ``grpc-status-details-bin``)."""
    try:
        from google.rpc import error_details_pb2, status_pb2
    except ImportError:  # googleapis-common-protos is a dependency; be safe
        return None, {}, None
    raw = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    if not raw:
        return None, {}, None
    status = status_pb2.Status.FromString(raw)
    reason, metadata, field = None, {}, None
    for any_ in status.details:
        if any_.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            any_.Unpack(info)
            reason, metadata = info.reason, dict(info.metadata)
        elif any_.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            any_.Unpack(bad)
            if bad.field_violations:
                field = bad.field_violations[0].field
    return reason, metadata, field


def _error(err: grpc.RpcError, addr: str) -> "PldError":
    reason, metadata, field = _details(err)
    return PldError(err.code(), err.details() or "", addr, reason, metadata, field)


def _wire_dtype(dtype: DtypeLike) -> int:
    if isinstance(dtype, str) and dtype.lower() in _NAMES:
        return _NAMES[dtype.lower()]
    try:
        return DTYPES[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise PldError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"dtype {dtype!r} is not one pld knows: use fp32 fp16 bf16 int32 int16 int8 int64 fp64",
        ) from None


def _reduce_op(op: str) -> int:
    if op not in _REDUCE:
        raise PldError(grpc.StatusCode.INVALID_ARGUMENT, f"reduce op {op!r} is not one of sum, max, min, prod")
    return _REDUCE[op]


def _np_dtype(dtype: DtypeLike) -> np.dtype:
    if isinstance(dtype, str) and dtype.lower() == "bf16":
        return np.dtype(np.uint16)
    if isinstance(dtype, str) and dtype.lower() in _NAMES:
        return {
            "fp32": np.dtype(np.float32),
            "fp16": np.dtype(np.float16),
            "int32": np.dtype(np.int32),
            "int16": np.dtype(np.int16),
            "int8": np.dtype(np.int8),
            "int64": np.dtype(np.int64),
            "fp64": np.dtype(np.float64),
        }[dtype.lower()]
    return np.dtype(dtype)


def _as_bytes(data: ArrayLike) -> bytes:
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
    return bytes(data)
