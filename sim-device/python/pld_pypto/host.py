"""The host program as it was recorded: its window buffers, its views
and its per-device dispatches, and which rank (or host) this thread runs.
Knows nothing of running it (``runtime``) or of kernels (``kernel``)."""

import sys
import threading

from . import dims

_local = threading.local()


class RunError(RuntimeError):
    """A rank's kernel failed; the message names the rank and the line."""


def current_rank():
    """The rank whose kernel this thread runs, or None on the host."""
    return getattr(_local, "rank", None)


def torch_of(values):
    """The torch module when one of ``values`` is a torch tensor, else
    None (pld-pypto itself does not depend on torch)."""
    return next(
        (sys.modules["torch"] for v in values if type(v).__module__.split(".")[0] == "torch"),
        None,
    )


def current_group():
    """The comm group of the dispatch this thread runs: its ranks in group
    order (a kernel's peer ``p`` is ``group[p]``), or None for every rank."""
    return getattr(_local, "group", None)


def current_host():
    """The host program being recorded, or None."""
    return getattr(_local, "host", None)


class HostBuffer:
    """``pld.alloc_window_buffer``'s result: the k-th buffer of the run."""

    def __init__(self, index, nbytes, name):
        self.index, self.nbytes, self.name = index, nbytes, name

    def __repr__(self):
        return f"WindowBuffer({self.name!r}, {self.nbytes} bytes)"


class ViewSpec:
    """``pld.window(buf, shape, dtype=)`` on the host: becomes each
    dispatched rank's DistributedTensor."""

    def __init__(self, buf, dims, dtype):
        self.buf, self.dims, self.dtype = buf, [int(d) for d in dims], dtype


class Host:
    """What one run of the host function did."""

    def __init__(self, nranks):
        self.nranks = nranks
        self.torch = None
        self.buffers = []
        self.dispatches = []

    def alloc(self, nbytes, name):
        buf = HostBuffer(len(self.buffers), int(nbytes), name or f"buffer{len(self.buffers)}")
        self.buffers.append(buf)
        return buf

    def dispatch(self, fn, args, kwargs, device):
        if not isinstance(device, int) or not 0 <= device < self.nranks:
            raise RunError(
                f"device={device!r} is not a rank: the ranks are 0 to {self.nranks - 1} (one per -d device id)"
            )
        self.dispatches.append((device, fn, args, kwargs))

    def step(self, fn, args, kwargs):
        """A host call (a SubWorker) in program order: it runs once every
        rank finished what was dispatched before it, and before anything
        dispatched after it starts."""
        self.dispatches.append((None, fn, args, kwargs))

    def comm_groups(self):
        """Each dispatch's comm group, in dispatch order, as PyPTO derives
        it: a window buffer belongs to the ranks its views are dispatched
        to, and a kernel addresses its peers by their place in that list.
        None where the group is every rank (peers are ranks), for host
        steps, and for a dispatch with no window view."""
        ranks = {}
        for device, _fn, args, kwargs in self.dispatches:
            for a in (*args, *kwargs.values()):
                if device is not None and isinstance(a, ViewSpec):
                    ranks.setdefault(a.buf.index, set()).add(device)
        groups = []
        for device, _fn, args, kwargs in self.dispatches:
            views = [a for a in (*args, *kwargs.values()) if isinstance(a, ViewSpec)]
            members = sorted(ranks[views[0].buf.index]) if device is not None and views else None
            groups.append(None if members is None or len(members) == self.nranks else members)
        return groups


def record(host_fn, args, kwargs, nranks):
    """Runs the host function once, recording; returns the Host."""
    host = Host(nranks)
    # Host tensors the program creates (pl.create_tensor) are of the kind
    # the caller passes: torch, as in PyPTO's host runtime, or numpy.
    host.torch = torch_of((*args, *kwargs.values()))
    _local.host = host
    try:
        with dims.bound(host_fn, args, kwargs):
            host_fn(*args, **kwargs)
    finally:
        _local.host = None
    return host
