"""``pypto.language.distributed`` (``pld``) on pld: the system, tile and
tensor tiers and the collectives, each one call into the rank's Rust
device (which checks it and sends its messages)."""

import linecache
import math
import re
import sys
import types

import numpy as np
from pld_pypto import collectives, errors, kernel, runtime, tasks  # noqa: F401 - `pld.errors`
from pld_pypto.enums import AtomicType, NotifyOp, ReduceOp, WaitCmp, member  # noqa: F401 - `pld.ReduceOp`, ...
from pld_pypto.kernel import DistributedTensor as _DT
from pld_pypto.kernel import Tile, as_numpy, dtype_name
from pld_pypto.runtime import HostBuffer, ViewSpec


class _DTAnnotation:
    def __getitem__(self, item):
        return ("DistributedTensor", item)

    def __instancecheck__(self, obj):
        return isinstance(obj, _DT)


DistributedTensor = _DTAnnotation()


class CommCtx:
    """``pld.get_comm_ctx(dt)``: the rank and the rank count."""

    def __init__(self, rank, nranks):
        self.rank, self.nranks = rank, nranks


_need_dt = collectives._need_dt
_operand = collectives.operand


def world_size():
    """``pld.world_size()``: the number of ranks."""
    host = runtime.current_host()
    if host is not None:
        return host.nranks
    group = runtime.current_group()
    return len(group) if group is not None else kernel.rank().nranks()


def get_comm_ctx(dt):
    """``pld.get_comm_ctx``."""
    _need_dt("get_comm_ctx", dt)
    r, group = kernel.rank(), runtime.current_group()
    if group is not None:
        # A dispatch on a subset of the ranks: its comm group's numbering.
        return CommCtx(group.index(r.rank()), len(group))
    return CommCtx(r.rank(), r.nranks())


def rank(ctx):
    """``pld.rank(ctx)``."""
    return ctx.rank


def nranks(ctx):
    """``pld.nranks(ctx)``."""
    return ctx.nranks


def alloc_window_buffer(size, dtype=None, name=None):
    """``pld.alloc_window_buffer(nbytes)`` or ``([shape], dtype=)`` on the
    host: the next buffer of every rank's window."""
    host = runtime.current_host()
    if host is None:
        raise RuntimeError("pld.alloc_window_buffer runs in the host orchestrator")
    if isinstance(size, (list, tuple)):
        if dtype is None:
            raise ValueError("pld.alloc_window_buffer([shape]) needs dtype=")
        nbytes = math.prod(int(s) for s in size) * dtype.get_byte()
    else:
        nbytes = int(size)
    return host.alloc(nbytes, name or _assigned_name(sys._getframe(1)))


def _assigned_name(frame):
    """The name the caller's line assigns to (``data_buf = pld.alloc_...``),
    so that diagnostics and race reports name the buffer as the program
    does; ``None`` when the line is not a plain assignment."""
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    m = re.match(r"\s*([A-Za-z_]\w*)\s*=[^=]", line)
    return m.group(1) if m else None


def window(buf, shape, dtype=None):
    """``pld.window(buf, shape, dtype=)``: a view of ``buf`` for each
    dispatched rank."""
    if not isinstance(buf, HostBuffer):
        raise TypeError(f"pld.window takes a buffer from pld.alloc_window_buffer, not {type(buf).__name__}")
    if dtype is None:
        raise ValueError("pld.window needs dtype=")
    return ViewSpec(buf, shape, dtype.name)


def _peer(p):
    """A peer index: integer arithmetic only, as on the device's scalar
    unit (FP32 scalar arithmetic on an index is a kernel bug there)."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer)):
        raise TypeError(
            f"peer {p!r} is a {type(p).__name__}: a peer index is INT32 scalar arithmetic "
            "(e.g. (my_rank + 1) % nranks); FP32 scalar arithmetic on an index is not allowed on the device"
        )
    group = runtime.current_group()
    if group is None:
        return int(p)
    if not 0 <= p < len(group):
        raise IndexError(
            f"peer {int(p)} is not in this dispatch's comm group: its window buffers are dispatched to "
            f"ranks {group}, which a kernel addresses as peers 0 to {len(group) - 1}"
        )
    return group[int(p)]


def _atomic(call, atomic):
    return member(call, "atomic", atomic, AtomicType) == AtomicType.Add


def _remote_load(target, peer, offsets, shape, valid_shape=None):
    _need_dt("pld.tile.remote_load", target)
    valid = kernel.two_d(valid_shape, "shape") if valid_shape is not None else None
    t = kernel.rank().remote_load(
        target.spec(), _peer(peer), kernel.two_d(offsets, "offsets"), kernel.two_d(shape, "shape"), valid
    )
    return Tile(t)


def _store(call, src, target, peer, offsets, atomic):
    _need_dt(call, target)
    kernel.rank().remote_store(
        _operand(src), target.spec(), _peer(peer), kernel.two_d(offsets, "offsets"), _atomic(call, atomic)
    )


def _tile_remote_store(src_tile, target, peer, offsets, atomic=AtomicType.None_):
    if not isinstance(src_tile, Tile):
        raise TypeError("pld.tile.remote_store stores a tile; for a tensor use pld.tensor.remote_store")
    _store("pld.tile.remote_store", src_tile, target, peer, offsets, atomic)


def _tensor_remote_store(src, target, peer, offsets, atomic=AtomicType.None_):
    if isinstance(src, Tile):
        raise TypeError("pld.tensor.remote_store stores a tensor; for a tile use pld.tile.remote_store")
    _store("pld.tensor.remote_store", src, target, peer, offsets, atomic)


def remote_store(src, target, peer, offsets, atomic=AtomicType.None_):
    """``pld.remote_store``: the device dispatches on the operand (a Tile or
    a Tensor; a window view is its error)."""
    _store("pld.remote_store", src, target, peer, offsets, atomic)


def _region(dst_offsets, src_offsets, shape):
    """The three region arguments, each 2-D or absent; the device checks
    that they go together."""

    def opt(v, what):
        return None if v is None else kernel.two_d(v, what)

    return (opt(dst_offsets, "offsets"), opt(src_offsets, "offsets"), opt(shape, "shape"))


def _put(dst, peer, src, dst_offsets=None, src_offsets=None, shape=None, *, atomic=AtomicType.None_,
         chunk_rows=0, chunk_cols=0, pipeline=False):
    _need_dt("pld.tensor.put", dst)
    region = _region(dst_offsets, src_offsets, shape)
    r = kernel.rank()
    if isinstance(src, _DT):
        r.put(dst.spec(), _peer(peer), b"", [0, 0], src_view=src.spec(), region=region, add=_atomic("pld.tensor.put", atomic),
              chunk_rows=chunk_rows, chunk_cols=chunk_cols, pipeline=pipeline)
        return
    a = np.ascontiguousarray(as_numpy(src))
    a2 = a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a
    r.put(dst.spec(), _peer(peer), a2.tobytes(), list(a2.shape), region=region, add=_atomic("pld.tensor.put", atomic),
          chunk_rows=chunk_rows, chunk_cols=chunk_cols, pipeline=pipeline)


def _get(dst, peer, src, dst_offsets=None, src_offsets=None, shape=None, *, chunk_rows=0, chunk_cols=0, pipeline=False):
    _need_dt("pld.tensor.get", src)
    region = _region(dst_offsets, src_offsets, shape)
    r = kernel.rank()
    if isinstance(dst, _DT):
        r.get(src.spec(), _peer(peer), b"", [0, 0], dst_view=dst.spec(), region=region,
              chunk_rows=chunk_rows, chunk_cols=chunk_cols, pipeline=pipeline)
        return
    a = as_numpy(dst)
    a2 = np.ascontiguousarray(a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a)
    out = r.get(src.spec(), _peer(peer), a2.tobytes(), list(a2.shape), region=region,
                chunk_rows=chunk_rows, chunk_cols=chunk_cols, pipeline=pipeline)
    a[...] = np.frombuffer(out, dtype=a.dtype).reshape(a.shape)


def _notify(target, peer, offsets, value, op=NotifyOp.Set):
    _need_dt("pld.system.notify", target)
    op = member("pld.system.notify", "op", op, NotifyOp)
    kernel.rank().notify(target.spec(), _peer(peer), kernel.two_d(offsets, "offsets"), int(value), op.value)


def _wait(signal, offsets, expected, cmp=WaitCmp.Ge):
    _need_dt("pld.system.wait", signal)
    cmp = member("pld.system.wait", "cmp", cmp, WaitCmp)
    return kernel.rank().wait(signal.spec(), kernel.two_d(offsets, "offsets"), int(expected), cmp.value)


def _register_defer_wait(signal, offsets, expected, cmp=WaitCmp.Ge):
    cmp = member("pld.system.defer_wait", "cmp", cmp, WaitCmp)
    kernel.rank().defer_wait(signal.spec(), kernel.two_d(offsets, "offsets"), int(expected), cmp.value)


def _defer_wait(signal, offsets, expected, cmp=WaitCmp.Ge):
    """In a ``pl.at`` task: the task completes once the condition holds
    (``pld_pypto.tasks``); elsewhere the device checks it at the kernel's
    completion."""
    _need_dt("pld.system.defer_wait", signal)
    args = (signal, offsets, int(tasks.resolve(expected)), cmp)
    if not tasks.defer_wait(_wait, _register_defer_wait, args):
        _register_defer_wait(*args)


# Ops a deferred task records (pld_pypto.tasks); remote stores return None.
_remote_load = tasks.deferrable("pld.tile.remote_load")(_remote_load)
_tile_remote_store = tasks.deferrable("pld.tile.remote_store")(_tile_remote_store)
_tensor_remote_store = tasks.deferrable("pld.tensor.remote_store")(_tensor_remote_store)
remote_store = tasks.deferrable("pld.remote_store")(remote_store)
_put = tasks.deferrable("pld.tensor.put")(_put)
_get = tasks.deferrable("pld.tensor.get")(_get)
_notify = tasks.deferrable("pld.system.notify")(_notify)
_wait = tasks.deferrable("pld.system.wait")(_wait)


system = types.SimpleNamespace(
    world_size=world_size, get_comm_ctx=get_comm_ctx, rank=rank, nranks=nranks,
    notify=_notify, wait=_wait, defer_wait=_defer_wait,
)
tile = types.SimpleNamespace(remote_load=_remote_load, remote_store=_tile_remote_store)
tensor = types.SimpleNamespace(
    alloc_window_buffer=alloc_window_buffer, window=window, remote_store=_tensor_remote_store,
    put=_put, get=_get, barrier=collectives.barrier, allreduce=collectives.allreduce,
    broadcast=collectives.broadcast, reduce_scatter=collectives.reduce_scatter,
    allgather=collectives.allgather, all_to_all=collectives.all_to_all, all_to_all_v=collectives.all_to_all_v,
)
remote_load = _remote_load
notify = _notify
wait = _wait
barrier = collectives.barrier
put = _put
get = _get
