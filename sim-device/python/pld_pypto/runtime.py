"""Running a host program: the host function runs once, recording its
window buffers and its per-device dispatches; then one thread per rank
allocates the same buffers (the Rust device checks they match) and runs
its kernels concurrently against the rank's device. A kernel that raises
cancels the other ranks' pending calls at once and fails the run naming
the rank and the program's line."""

import threading
import traceback

from . import _native, dims, tasks
# The recorded program lives in `host`; re-exported here, where the shim
# and `program` have always found it.
from .host import Host, HostBuffer, RunError, ViewSpec, _local, current_group, current_host, current_rank, record  # noqa: F401
from .kernel import to_kernel_arg
from .options import OPTIONS


def _program_line(tb):
    """The innermost frame of the user's program (not of pld_pypto)."""
    frames = [f for f in traceback.extract_tb(tb) if "pld_pypto" not in f.filename]
    if not frames:
        return "?"
    f = frames[-1]
    return f"{f.filename}:{f.lineno} ({f.line})"


# ``--checked``: accesses that no barrier, wait or atomic ordered (the
# device's error kind `Races`).
RacesFound = _native.Races


def _cancelled(e):
    """Whether ``e`` is a consequence of another rank's failure."""
    return isinstance(e, threading.BrokenBarrierError) or str(e).startswith("cancelled:")


def _host_step(r, step, fn, args, kwargs):
    """A SubWorker call: every rank's earlier work done, rank 0's thread
    runs it with the caller's objects, then every rank goes on."""
    current_rank_ = _local.rank
    current_rank_.quiet()
    step.wait()
    if r == 0:
        fn(*args, **kwargs)
    step.wait()


# The data window every rank starts with: the program's buffers, plus this
# much for the collectives' scratch (and buffers of a few MiB, as before).
SCRATCH_BYTES = 16 << 20


def data_window_bytes(host, daemons=()):
    """The data window ``host``'s recorded buffers need (64-byte aligned
    each, as the device places them), plus the collectives' scratch when
    pld-pypto starts the ranks. A running daemon's window has the size it
    was started with: the buffers must fit, and the scratch takes what is
    left (reserved on demand, with an error naming the window if short)."""
    buffers = sum((b.nbytes + 63) // 64 * 64 for b in host.buffers) + _order_bytes(host.nranks)
    return buffers if daemons else buffers + SCRATCH_BYTES


def _order_bytes(nranks):
    """The signal of the barrier that orders a prepared program's calls:
    one int32 cell per rank, 64-byte aligned."""
    return (4 * nranks + 63) // 64 * 64


def execute(host, platform):
    """Starts the ranks and runs every dispatch; returns when all ended."""
    with Ranks(host, platform) as ranks:
        ranks.run(host)


class Ranks:
    """A cluster of ranks for one program: its window buffers allocated once,
    then ``run`` any number of times (``compiled.prepare(persistent=True)``
    keeps one across calls; the windows keep what the last call left,
    unless ``reset`` zeroes the buffers first)."""

    def __init__(self, host, platform):
        self.nranks, self.buffers = host.nranks, [(b.name, b.nbytes) for b in host.buffers]
        self.cluster = _native.Cluster(
            host.nranks,
            platform=platform,
            transport=OPTIONS.transport,
            timeout_s=OPTIONS.timeout_s,
            daemons=OPTIONS.daemons,
            token=OPTIONS.token,
            checked=OPTIONS.checked,
            trace=bool(OPTIONS.trace),
            data_bytes=data_window_bytes(host, OPTIONS.daemons),
        )
        self.ranks = self.cluster.ranks()
        self.allocated = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cluster.close()

    def run(self, host, reset=False):
        """Runs ``host``'s dispatches on these ranks."""
        mine = [(b.name, b.nbytes) for b in host.buffers]
        if self.allocated and mine != self.buffers:
            raise RunError(
                f"a prepared program allocates the same window buffers on every call: first {self.buffers}, now {mine}"
            )
        ranks, cluster, failures = self.ranks, self.cluster, {}
        # Host steps (SubWorkers) hold every rank; a failed rank breaks it.
        step = threading.Barrier(host.nranks, timeout=OPTIONS.timeout_s)
        first = not self.allocated
        groups = host.comm_groups()

        def run_rank(r):
            _local.rank = ranks[r]
            try:
                order = (len(self.buffers), [host.nranks, 1], "int32")
                if first:
                    for name, nbytes in self.buffers:
                        ranks[r].alloc_window_buffer(name, nbytes)
                    ranks[r].alloc_window_buffer("pld: call order", _order_bytes(host.nranks))
                else:
                    if reset:
                        for k, (_, nbytes) in enumerate(self.buffers):
                            ranks[r].put((k, [nbytes], "int8"), r, bytes(nbytes), [1, nbytes])
                    # The last call (and the reset) ended on every rank
                    # before this one starts: a real barrier, so that the
                    # race detector knows it as the program does.
                    ranks[r].barrier(order)
                for (device, fn, args, kwargs), group in zip(host.dispatches, groups):
                    if device is None:
                        _host_step(r, step, fn, args, kwargs)
                        continue
                    if device != r:
                        continue
                    kargs = [to_kernel_arg(a) for a in args]
                    kkwargs = {k: to_kernel_arg(v) for k, v in kwargs.items()}
                    _local.group = group
                    with dims.bound(fn, kargs, kkwargs):
                        fn(*kargs, **kkwargs)
                        tasks.flush()  # tasks deferred outside a manual_scope
                    _local.group = None
                ranks[r].complete()
                ranks[r].quiet()
            except BaseException as e:  # noqa: BLE001 - reported with its rank
                failures[r] = (e, _program_line(e.__traceback__))
                if not _cancelled(e):
                    step.abort()
                    cluster.cancel(f"rank {r} failed: {e}")
            finally:
                _local.rank = _local.group = None
                tasks.reset()

        threads = [threading.Thread(target=run_rank, args=(r,), name=f"rank {r}") for r in range(host.nranks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.allocated = True
        if OPTIONS.trace:
            # Everything recorded so far, a failed run's too.
            with open(OPTIONS.trace, "w", encoding="utf-8") as f:
                f.write(cluster.trace_json() or "")
        # The cause is the lowest rank that failed on its own; the others
        # were cancelled because of it.
        causes = sorted(failures, key=lambda r: (_cancelled(failures[r][0]), r))
        if causes:
            r = causes[0]
            e, line = failures[r]
            why = f"rank {r} failed at {line}: {e}"
            # A device error keeps its kind (`except pld.errors.WaitTimeout`).
            if isinstance(e, _native.PldError):
                raise type(e)(why) from e
            raise RunError(why) from e
        cluster.check_symmetric()
        races = cluster.race_reports()
        if races:
            raise RacesFound(f"checked: {len(races)} race(s) — the result depends on timing:\n" + "\n".join(races))
