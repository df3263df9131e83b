"""Running a host program: the host function runs once, recording its
window buffers and its per-device dispatches; then one thread per rank
allocates the same buffers (the Rust device checks they match) and runs
its kernels concurrently against the rank's device. A kernel that raises
cancels the other ranks' pending calls at once and fails the run naming
the rank and the program's line."""

import threading
import traceback

from . import _native
from .options import OPTIONS

_local = threading.local()


class RunError(RuntimeError):
    """A rank's kernel failed; the message names the rank and the line."""


def current_rank():
    """The rank whose kernel this thread runs, or None on the host."""
    return getattr(_local, "rank", None)


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


def record(host_fn, args, kwargs, nranks):
    """Runs the host function once, recording; returns the Host."""
    host = Host(nranks)
    _local.host = host
    try:
        host_fn(*args, **kwargs)
    finally:
        _local.host = None
    return host


def _program_line(tb):
    """The innermost frame of the user's program (not of pld_pypto)."""
    frames = [f for f in traceback.extract_tb(tb) if "pld_pypto" not in f.filename]
    if not frames:
        return "?"
    f = frames[-1]
    return f"{f.filename}:{f.lineno} ({f.line})"


class RacesFound(RuntimeError):
    """``--checked``: accesses that no barrier, wait or atomic ordered."""


def _cancelled(e):
    return str(e).startswith("cancelled:")


def execute(host, platform):
    """Starts the ranks and runs every dispatch; returns when all ended."""
    from .kernel import to_kernel_arg  # the kernel layer needs the rank handles

    cluster = _native.Cluster(
        host.nranks,
        platform=platform,
        transport=OPTIONS.transport,
        timeout_s=OPTIONS.timeout_s,
        daemons=OPTIONS.daemons,
        token=OPTIONS.token,
        checked=OPTIONS.checked,
    )
    ranks = cluster.ranks()
    failures = {}

    def run_rank(r):
        _local.rank = ranks[r]
        try:
            for buf in host.buffers:
                ranks[r].alloc_window_buffer(buf.name, buf.nbytes)
            for device, fn, args, kwargs in host.dispatches:
                if device != r:
                    continue
                fn(*[to_kernel_arg(a) for a in args], **{k: to_kernel_arg(v) for k, v in kwargs.items()})
            ranks[r].complete()
        except BaseException as e:  # noqa: BLE001 - reported with its rank
            failures[r] = (e, _program_line(e.__traceback__))
            if not _cancelled(e):
                cluster.cancel(f"rank {r} failed: {e}")
        finally:
            _local.rank = None

    threads = [threading.Thread(target=run_rank, args=(r,), name=f"rank {r}") for r in range(host.nranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        # The cause is the lowest rank that failed on its own; the others
        # were cancelled because of it.
        causes = sorted(failures, key=lambda r: (_cancelled(failures[r][0]), r))
        if causes:
            r = causes[0]
            e, line = failures[r]
            raise RunError(f"rank {r} failed at {line}: {e}") from e
        cluster.check_symmetric()
        races = cluster.race_reports()
        if races:
            raise RacesFound(f"checked: {len(races)} race(s) — the result depends on timing:\n" + "\n".join(races))
    finally:
        cluster.close()
