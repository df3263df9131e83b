"""Programs: the ``pl.jit`` decorators, the ``@pl.program`` class form and
the run path (``program.compile(...)``, ``ir.compile(...)``, calling the
compiled program)."""

import enum
import inspect
import pathlib
import tempfile

from . import _native, dims, runtime, worker


class FunctionType(enum.Enum):
    """``pl.FunctionType``."""

    InCore = "InCore"
    Orchestration = "Orchestration"
    Opaque = "Opaque"


class Level(enum.Enum):
    """``pl.Level``."""

    HOST = "HOST"
    CHIP = "CHIP"
    CORE_GROUP = "CORE_GROUP"
    CORE = "CORE"


class Role(enum.Enum):
    """``pl.Role``."""

    Orchestrator = "Orchestrator"
    Worker = "Worker"
    SubWorker = "SubWorker"


class JitFunction:
    """A decorated function: a kernel (called in a rank's thread, or
    dispatched from the host with ``device=r``) or a host orchestrator
    (``compile``d and called once)."""

    def __init__(self, fn, kind, owner=None, ftype=None):
        # kind: "kernel", "host" (the orchestrator) or "subworker" (a host
        # callable, PyPTO's Role.SubWorker: a plain function, no self).
        self.fn, self.kind, self.owner, self.ftype = fn, kind, owner, ftype
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __get__(self, obj, objtype=None):
        if obj is None or self.kind == "subworker":
            return self
        return JitFunction(self.fn.__get__(obj, objtype), self.kind, owner=obj, ftype=self.ftype)

    def __call__(self, *args, device=None, config=None, **kwargs):
        host = runtime.current_host()
        if device is not None:
            if host is None:
                raise RuntimeError(
                    f"{self.__name__}(..., device={device}) dispatches to a rank: call it inside the host "
                    "orchestrator (@pl.jit.host or level=pl.Level.HOST) that compile() runs"
                )
            host.dispatch(self.fn, args, kwargs, device)
            return None
        if host is not None and runtime.current_rank() is None and self.kind != "host":
            if self.kind == "subworker":
                # After every dispatch before it, on the host (rank 0's
                # thread, the others held at the step), with the caller's
                # own objects (torch tensors stay torch tensors).
                host.step(self.fn, args, kwargs)
            else:
                # A chip-level call from the host without device=: the
                # first device runs it, as PyPTO's L3 default.
                host.dispatch(self.fn, args, kwargs, 0)
            return _outputs(self.fn, args, kwargs)
        if self.kind == "host" and host is None and runtime.current_rank() is None:
            raise RuntimeError(
                f"{self.__name__} is a host orchestrator: compile it first "
                "(program.compile(..., config=RunConfig(...)) or ir.compile(program, ...))"
            )
        with dims.bound(self.fn, args, kwargs):
            return self.fn(*args, **kwargs)

    def compile(self, *args, config=None, **kwargs):
        """``program.compile(x, y, config=RunConfig(...))``."""
        platform, ids = _config(config)
        return Compiled(self, platform, ids)


class _Jit:
    """``pl.jit`` (tensor-level kernel), ``pl.jit.incore`` (tile-level
    kernel), ``pl.jit.host`` (host orchestrator)."""

    def __call__(self, fn=None, **_options):
        if fn is None:
            return lambda f: JitFunction(f, "kernel")
        return JitFunction(fn, "kernel")

    @staticmethod
    def incore(fn=None, **_options):
        if fn is None:
            return lambda f: JitFunction(f, "kernel")
        return JitFunction(fn, "kernel")

    @staticmethod
    def host(fn=None, **_options):
        if fn is None:
            return lambda f: JitFunction(f, "host")
        return JitFunction(fn, "host")


jit = _Jit()


def function(fn=None, *, type=None, level=None, role=None, **_options):  # noqa: A002
    """``@pl.function(type=..., level=..., role=...)`` in a ``@pl.program``
    class: ``level=pl.Level.HOST`` marks the host orchestrator."""

    def wrap(f):
        if level == Level.HOST:
            return JitFunction(f, "subworker" if role == Role.SubWorker else "host", ftype=type)
        return JitFunction(f, "kernel", ftype=type)

    return wrap(fn) if fn is not None else wrap


def program(cls):
    """``@pl.program``: a class whose methods are the program's functions."""
    cls.__pld_program__ = True
    return cls


def _config(config=None, platform=None, distributed_config=None):
    if config is not None:
        platform = platform or getattr(config, "platform", None)
        distributed_config = distributed_config or getattr(config, "distributed_config", None)
    ids = list(getattr(distributed_config, "device_ids", None) or [0, 1])
    return platform or "a2a3sim", ids


def compile_program(program, platform=None, distributed_config=None, **_options):
    """``ir.compile(program, platform=..., distributed_config=...)``."""
    platform, ids = _config(None, platform, distributed_config)
    if isinstance(program, JitFunction):
        return Compiled(program, platform, ids)
    instance = program() if isinstance(program, type) else program
    hosts = [
        getattr(instance, name)
        for name, attr in vars(type(instance)).items()
        if isinstance(attr, JitFunction) and attr.kind == "host"
    ]
    if not hosts:
        orchs = {
            name: getattr(instance, name)
            for name, attr in vars(type(instance)).items()
            if isinstance(attr, JitFunction) and attr.ftype == FunctionType.Orchestration
        }
        if len(orchs) == 1:
            return Compiled(_ChipRun(next(iter(orchs.values()))), platform, ids[:1])
        if orchs:
            return MultiCompiled({n: Compiled(_ChipRun(o), platform, ids[:1]) for n, o in orchs.items()})
    if len(hosts) != 1:
        raise ValueError(
            f"{type(instance).__name__}: a program needs exactly one host orchestrator "
            f"(@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)); found {len(hosts)}"
        )
    return Compiled(hosts[0], platform, ids)


class Compiled:
    """A compiled distributed program: call it with the host arguments."""

    def __init__(self, host, platform, device_ids):
        _native.check_devices([int(d) for d in device_ids])
        self.host, self.platform, self.device_ids = host, platform, list(device_ids)
        # A Path, as PyPTO's: pld generates no code, so it holds only what
        # pld ran (tests that look for generated files find none there).
        self.output_dir = pathlib.Path(tempfile.mkdtemp(prefix=f"pld-pypto-{host.__name__}-"))
        (self.output_dir / "program.txt").write_text(
            f"{host.__name__} on {len(device_ids)} ranks ({platform}), devices {device_ids}\n"
        )

    def __call__(self, *args, config=None, **kwargs):
        # One run path: a plain call is a one-shot worker's call.
        return worker.DistributedWorker(self)(*args, **kwargs)

    def prepare(self, config=None, *, extra_compiled=(), persistent=False, reset_persistent_windows=True,
                callbacks=None, sub_worker_overrides=None, startup_timeout_s=None):
        """``with compiled.prepare(config=..., persistent=...) as worker:
        worker(args...)``. Persistent: one set of ranks for every call, the
        window buffers allocated once and, with
        ``reset_persistent_windows=False``, keeping what the last call left
        (signals included); otherwise each call runs on fresh ranks, as a
        plain call does. The NPU runtime's other options (ring sizes,
        callbacks, startup timeout) have nothing to act on here. ``sub_worker_overrides``
        (``{name: fn(args)}``) runs ``fn`` with the list of arguments in
        place of the program's SubWorker ``name``."""
        overrides = dict(sub_worker_overrides or {})
        owner = getattr(self.host, "owner", None)
        subs = sorted(
            n for n, a in vars(type(owner)).items() if isinstance(a, JitFunction) and a.kind == "subworker"
        ) if owner is not None else []
        unknown = sorted(set(overrides) - set(subs))
        if unknown:
            raise ValueError(f"sub_worker_overrides names {unknown}, which are not sub-workers of the program (those are {subs})")
        return worker.DistributedWorker(
            self, persistent=persistent, reset_persistent_windows=reset_persistent_windows,
            sub_worker_overrides=overrides, extra_compiled=extra_compiled,
        )


class _ChipRun:
    """A chip-level (L2) orchestration function as a program of its own:
    the host dispatches it to the first device."""

    def __init__(self, orch):
        self.orch, self.__name__ = orch, orch.__name__

    def fn(self, *args, **kwargs):
        runtime.current_host().dispatch(self.orch.fn, args, kwargs, 0)


class MultiCompiled:
    """A program of several L2 orchestration functions and no host
    orchestrator: ``compiled["name"](args..., config=...)`` runs one."""

    def __init__(self, parts):
        self._parts = parts

    def __getitem__(self, name):
        try:
            return self._parts[name]
        except KeyError:
            raise KeyError(f"no orchestration function {name!r}; the program has {sorted(self._parts)}") from None

    def __iter__(self):
        return iter(self._parts)

    def __len__(self):
        return len(self._parts)


def _outputs(fn, args, kwargs):
    """What a chip-level call returns to the host: its ``pl.Out`` /
    ``pl.InOut`` arguments (one, or a tuple in order), which hold its
    results once it ran; the last argument when none is annotated."""
    try:
        sig = inspect.signature(fn)
        bound = sig.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return args[-1] if args else None
    outs = [
        v for name, v in bound.arguments.items()
        if getattr(sig.parameters[name].annotation, "kind", None) in ("Out", "InOut")
    ]
    if not outs:
        return args[-1] if args else None
    return outs[0] if len(outs) == 1 else tuple(outs)

