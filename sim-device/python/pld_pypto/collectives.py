"""``pld.tensor``'s collectives, with PyPTO's published signatures, in
both places a program calls them:

- **in a kernel** (a function dispatched with ``device=r``) on this rank's
  window views: one call into the rank's Rust device, which checks the
  views and the signal and sends the messages;
- **in the host orchestrator** on ``pld.window`` views (PyPTO's HOST
  builtins): the builtin runs on every rank, in program order with the
  dispatches around it, as one dispatch per rank of the kernel form. The
  signal may be rank-1 ``[world_size]`` there (one cell per rank, the same
  memory as ``[world_size, 1]``), and ``allreduce`` may leave it out: a
  private ``[world_size, core_num]`` signal is allocated for the call, as
  PyPTO's compiler synthesises one.

``all_to_all_v`` is composed of the device's put, notify and barrier (each
checked there): every rank pushes ``MAX_RECV = target rows / world_size``
rows to each peer and publishes how many of them are valid."""

import numpy as np

from . import kernel, runtime
from .host import ViewSpec
from .enums import NotifyOp, ReduceOp, member
from .kernel import DistributedTensor, Tile, as_numpy, dtype_name

_MISSING = object()


def _need_dt(call, x):
    """``x``, a window view; a tile or a host array is the device's
    ``NotDistributed`` error (``pld.errors.NotDistributed``)."""
    if isinstance(x, DistributedTensor):
        return x
    a = as_numpy(x)
    if isinstance(x, Tile) or isinstance(a, np.ndarray):
        name = "a tile" if isinstance(x, Tile) else f"host array {list(a.shape)}"
        kernel.rank().need_distributed(call, operand(x), name)
    raise TypeError(f"{call} needs a DistributedTensor, not a {type(x).__name__}")


def operand(src):
    """A source as the native calls take it: a tile, a window view, or
    local data with its 2-D shape."""
    if isinstance(src, Tile):
        return src.native
    if isinstance(src, DistributedTensor):
        return src.spec()
    a = np.ascontiguousarray(as_numpy(src))
    a2 = a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a
    return (a2.tobytes(), list(a2.shape))


def _host(call, views):
    """The host being recorded when ``call`` runs in the host orchestrator
    (every view a ``pld.window``), else None (a kernel)."""
    host = runtime.current_host()
    if host is None or runtime.current_rank() is not None:
        return None
    for name, v in views.items():
        if not isinstance(v, ViewSpec):
            raise TypeError(f"{call} in the host orchestrator: {name} must be a pld.window(...) view, not {type(v).__name__}")
    return host


def _row_signal(host, signal):
    """A host signal: rank-1 ``[world_size]`` is the same cells as
    ``[world_size, 1]``, the shape the device's collectives take."""
    if len(signal.dims) == 1:
        return ViewSpec(signal.buf, [signal.dims[0], 1], signal.dtype)
    return signal


def _on_every_rank(host, fn, args, kwargs):
    for r in range(host.nranks):
        host.dispatch(fn, args, kwargs, r)


def allreduce(target, signal=_MISSING, *, op=None, mode="mesh", core_num=1):
    """``pld.tensor.allreduce(target, signal=..., *, op=ReduceOp.Sum,
    mode="mesh", core_num=1)``: every rank's ``target`` holds the reduction
    of all ranks' ``target``. ``core_num`` AIV blocks (HOST only) each take
    a lane (a column) of the signal; pld's rank reduces the whole target in
    one stream and leaves the other lanes at zero, as they end on the NPU."""
    op = ReduceOp.Sum if op is None else member("pld.tensor.allreduce", "op", op, ReduceOp)
    if not isinstance(core_num, int) or isinstance(core_num, bool):
        raise TypeError(f"pld.tensor.allreduce core_num must be a positive compile-time int, got {type(core_num).__name__}")
    if core_num <= 0:
        raise ValueError(f"pld.tensor.allreduce core_num must be positive, got {core_num}")
    if mode not in ("mesh", "ring"):
        raise ValueError(f'pld.tensor.allreduce mode must be "mesh" or "ring", got {mode!r}')
    if mode == "ring" and core_num != 1:
        raise ValueError('pld.tensor.allreduce: mode="ring" requires core_num=1 (multicore is mesh only)')
    if signal is None:
        raise TypeError("pld.tensor.allreduce signal cannot be None; omit the signal argument for host synthesis")
    host = _host("pld.tensor.allreduce", {"target": target} if signal is _MISSING else {"target": target, "signal": signal})
    if host is None:
        if signal is _MISSING:
            raise ValueError("pld.tensor.allreduce in a kernel needs its signal: allreduce(target, signal, op=..., mode=...)")
        if core_num != 1:
            raise ValueError("pld.tensor.allreduce core_num is a HOST builtin option; in a kernel keep it at 1")
        _need_dt("pld.tensor.allreduce", target)
        kernel.rank().collective(
            "allreduce", target.spec(), _need_dt("allreduce", signal).spec(), op=op.value, mode=mode
        )
        return target
    if signal is _MISSING:
        if mode != "mesh":
            raise ValueError(
                f'pld.tensor.allreduce mode="{mode}" requires an explicit signal; host signal synthesis only supports mesh mode'
            )
        buf = host.alloc(host.nranks * core_num * 4, f"allreduce_signal{len(host.buffers)}")
        signal = ViewSpec(buf, [host.nranks, core_num], "int32")
    signal = _row_signal(host, signal)
    if mode == "mesh" and (len(signal.dims) < 2 or signal.dims[-1] < core_num):
        raise ValueError(
            f"pld.tensor.allreduce core_num={core_num}: the signal {signal.dims} needs a lane (column) per core "
            f"([world_size, >= {core_num}])"
        )
    _on_every_rank(host, allreduce, (target, signal), {"op": op, "mode": mode})
    return target


def barrier(signal):
    """``pld.tensor.barrier(signal)``: every rank has arrived."""
    host = _host("pld.tensor.barrier", {"signal": signal})
    if host is not None:
        _on_every_rank(host, barrier, (_row_signal(host, signal),), {})
        return signal
    _need_dt("pld.tensor.barrier", signal)
    kernel.rank().barrier(signal.spec())
    return signal


def broadcast(target, signal, *, root):
    """``pld.tensor.broadcast(target, signal, *, root)``: every rank's
    ``target`` holds ``root``'s."""
    if not isinstance(root, int) or root < 0:
        raise ValueError(f"pld.tensor.broadcast root must be a non-negative rank, got {root!r}")
    host = _host("pld.tensor.broadcast", {"target": target, "signal": signal})
    if host is not None:
        if root >= host.nranks:
            raise ValueError(f"pld.tensor.broadcast root={root} is not a rank of the {host.nranks} participating")
        _on_every_rank(host, broadcast, (target, _row_signal(host, signal)), {"root": root})
        return target
    _need_dt("pld.tensor.broadcast", target)
    kernel.rank().collective("broadcast", target.spec(), _need_dt("broadcast", signal).spec(), root=int(root))
    return target


def reduce_scatter(target, signal, *, op=None):
    """``pld.tensor.reduce_scatter(target, signal, *, op=ReduceOp.Sum)``:
    row r of rank r's ``target`` holds the reduction of every rank's row r."""
    op = ReduceOp.Sum if op is None else member("pld.tensor.reduce_scatter", "op", op, ReduceOp)
    host = _host("pld.tensor.reduce_scatter", {"target": target, "signal": signal})
    if host is not None:
        _on_every_rank(host, reduce_scatter, (target, _row_signal(host, signal)), {"op": op})
        return target
    _need_dt("pld.tensor.reduce_scatter", target)
    kernel.rank().collective("reduce_scatter", target.spec(), _need_dt("reduce_scatter", signal).spec(), op=op.value)
    return target


def _pushed(name, local, target, signal):
    host = _host(f"pld.tensor.{name}", {"target": target, "signal": signal})
    if host is not None:
        _on_every_rank(host, _pushed, (name, local, target, _row_signal(host, signal)), {})
        return target
    _need_dt(f"pld.tensor.{name}", target)
    s = _need_dt(name, signal).spec()
    if isinstance(local, DistributedTensor):
        kernel.rank().collective(name, target.spec(), s, src_view=local.spec())
    else:
        a = np.ascontiguousarray(as_numpy(local))
        a2 = a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a
        if dtype_name(a2) != target.dtype:
            a2 = a2.astype(kernel.NP[target.dtype])
        kernel.rank().collective(name, target.spec(), s, data=a2.tobytes(), shape=list(a2.shape))
    return target


def allgather(local_data, target, signal):
    """``pld.tensor.allgather(local_data, target, signal)``: row r of every
    rank's ``target`` holds rank r's ``local_data``."""
    return _pushed("allgather", local_data, target, signal)


def all_to_all(input, target, signal):  # noqa: A002
    """``pld.tensor.all_to_all(input, target, signal)``: row s of rank d's
    ``target`` holds row d of rank s's ``input``."""
    return _pushed("all_to_all", input, target, signal)


def all_to_all_v(input, target, signal, send_counts, recv_counts):  # noqa: A002
    """``pld.tensor.all_to_all_v(input, target, signal, send_counts,
    recv_counts)``: rows ``d*MAX_RECV ..`` of this rank's ``input`` go to
    rows ``me*MAX_RECV ..`` of rank d's ``target`` (``MAX_RECV`` rows, of
    which ``min(send_counts[d], MAX_RECV)`` are valid; that count lands in
    rank d's ``recv_counts[me, 0]``)."""
    views = {"target": target, "signal": signal, "recv_counts": recv_counts}
    host = _host("pld.tensor.all_to_all_v", views)
    if host is not None:
        args = (input, target, _row_signal(host, signal), send_counts, recv_counts)
        _on_every_rank(host, all_to_all_v, args, {})
        return target
    for name, v in views.items():
        _need_dt(f"pld.tensor.all_to_all_v {name}", v)
    r = kernel.rank()
    me, p = r.rank(), r.nranks()
    rows, cols = target.shape2
    if rows % p:
        raise ValueError(f"pld.tensor.all_to_all_v: target has {rows} rows, not a multiple of the {p} ranks (MAX_RECV each)")
    max_recv = rows // p
    counts = _counts(send_counts, p)
    for k in range(p):
        dest = (me + k) % p
        src_rows = [dest * max_recv, 0]
        region = ([me * max_recv, 0], src_rows, [max_recv, cols])
        if isinstance(input, DistributedTensor):
            r.put(target.spec(), dest, b"", [0, 0], src_view=input.spec(), region=region, add=False)
        else:
            a = np.ascontiguousarray(as_numpy(input))
            a2 = a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a
            r.put(target.spec(), dest, a2.tobytes(), list(a2.shape), region=region, add=False)
        valid = min(max(int(counts[dest]), 0), max_recv)
        r.notify(recv_counts.spec(), dest, [me, 0], valid, NotifyOp.Set.value)
    r.barrier(signal.spec())
    return target


def _counts(send_counts, p):
    """``send_counts`` (``[NR]`` or ``[NR, 1]``, a tensor or a window view)
    as ``p`` integers."""
    if isinstance(send_counts, DistributedTensor):
        raw = kernel.rank().read(send_counts.spec())
        values = np.frombuffer(raw, dtype=kernel.NP[send_counts.dtype])
    else:
        values = np.asarray(as_numpy(send_counts)).reshape(-1)
    if values.size < p:
        raise ValueError(f"pld.tensor.all_to_all_v: send_counts has {values.size} entries; it needs one per rank ({p})")
    return [int(v) for v in values[:p]]
