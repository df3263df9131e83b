"""``compiled.prepare()``'s ``DistributedWorker``: a program prepared once
and called many times, its resident tensors (``alloc_tensor``,
``alloc_stacked_tensor``), ``submit`` / ``run`` / ``register``, and the
two calling conventions (every argument, or the inputs only with the
``pl.Out`` tensors allocated and returned).

pld runs kernels eagerly in host memory, so a resident tensor is a copy
made at upload: later writes to the upload source do not reach it, as on
a device; it is passed to the program in place of a host tensor."""

import inspect
import sys

import numpy as np

from . import dims, kernel, runtime
from .host import torch_of


class DeviceTensor:
    """``rt.alloc_tensor(...)``: a tensor resident for the worker's life."""

    def __init__(self, data, worker_id=0):
        self.data, self.worker_id, self.freed = data, worker_id, False

    @property
    def shape(self):
        return tuple(self.data.shape)

    @property
    def dtype(self):
        return self.data.dtype

    def value(self, call):
        if self.freed:
            raise RuntimeError(f"{call}: this DeviceTensor was freed (rt.free_tensor)")
        return self.data


class StackedDeviceTensor:
    """``rt.alloc_stacked_tensor(host, worker_ids=)``: shard ``i`` of a
    ``[B, *tail]`` tensor resident on worker ``worker_ids[i]``; the host
    orchestrator indexes ``x[i]`` to reach it."""

    def __init__(self, shards, shape, worker_ids):
        self.shards, self.shape, self.worker_ids = list(shards), tuple(shape), tuple(worker_ids)

    def __getitem__(self, i):
        return self.shards[int(i)].value("StackedDeviceTensor[i]")

    def __len__(self):
        return len(self.shards)


class RunHandle:
    """What ``rt.submit`` returns: pld has run the dispatch when it
    returns, so the handle is done and ``result()`` gives its outputs."""

    def __init__(self, outputs):
        self._outputs = outputs

    def done(self):
        return True

    def result(self, timeout=None):
        return self._outputs

    def wait(self, timeout=None):
        return None


class RegistrationHandle:
    """``rt.register(compiled)``: calling it runs ``compiled`` on the
    worker; closed with the worker."""

    def __init__(self, worker, compiled):
        self.worker, self.compiled, self.cid, self.closed = worker, compiled, 0, False

    def __call__(self, *args, config=None):
        if self.closed:
            raise RuntimeError("RegistrationHandle called after close()")
        return self.worker.run(self.compiled, *args, config=config)


class DistributedWorker:
    """A prepared program: ``rt(args...)`` runs it; see ``Compiled.prepare``."""

    def __init__(self, compiled, *, persistent=False, reset_persistent_windows=True, sub_worker_overrides=None,
                 inherited_host_tensors=(), extra_compiled=(), **_runtime_options):
        # `DistributedWorker([a, b])` prepares several programs, as
        # `compiled.prepare(extra_compiled=[b])` does.
        programs = list(compiled) if isinstance(compiled, (list, tuple)) else [compiled, *extra_compiled]
        if not programs:
            raise ValueError("DistributedWorker needs at least one compiled program")
        self.compiled, self.programs, self.persistent = programs[0], programs, persistent
        self.reset = True if reset_persistent_windows is None else reset_persistent_windows
        self.overrides = dict(sub_worker_overrides or {})
        self._inherited = tuple(inherited_host_tensors)
        self.ranks, self.closed = None, False
        # The resident tensors not yet freed (close() frees them), and the
        # registration handles (close() closes them).
        self._owned_tensors, self._handles = set(), []
        # PyPTO's tests read the NPU runtime's count of comm-domain
        # allocations (``worker._w._next_alloc_id``): here, how many times
        # this worker allocated the program's window buffers on ranks.
        self._w = _Allocations()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.ranks is not None:
            self.ranks.__exit__(None, None, None)
            self.ranks = None
        for t in self._owned_tensors:
            t.freed = True
        self._owned_tensors.clear()
        for h in self._handles:
            h.closed = True
        self.closed = True

    def _open(self, call):
        if self.closed:
            raise RuntimeError(f"DistributedWorker.{call}() called after close()")

    def __call__(self, *args, config=None, **kwargs):
        if len(self.programs) > 1:
            raise TypeError(
                f"rt(*args) is ambiguous: this worker prepared {len(self.programs)} programs; "
                "name one with rt.run(compiled, *args)"
            )
        return self._dispatch(self.compiled, args, kwargs)

    def submit(self, compiled, *args, config=None):
        return RunHandle(self._dispatch(self._registered(compiled, "submit"), args, {}))

    def run(self, compiled, *args, config=None):
        return self.submit(compiled, *args, config=config).result()

    def register(self, compiled):
        """A handle that runs ``compiled`` on this worker when called."""
        handle = RegistrationHandle(self, self._registered(compiled, "register"))
        self._handles.append(handle)
        return handle

    def _registered(self, compiled, call):
        self._open(call)
        if not any(compiled is p for p in self.programs):
            raise ValueError(
                f"DistributedWorker.{call}: this program was not prepared on this worker "
                "(compiled.prepare(extra_compiled=[...]) prepares several)"
            )
        return compiled

    def _dispatch(self, compiled, args, kwargs):
        self._open("run")
        args = [a.value("a dispatch argument") if isinstance(a, DeviceTensor) else a for a in args]
        args, outputs = return_style(compiled.host.fn, args, kwargs)
        host = runtime.record(compiled.host.fn, args, kwargs, len(compiled.device_ids))
        for i, (device, fn, a, k) in enumerate(host.dispatches):
            override = self.overrides.get(getattr(fn, "__name__", None)) if device is None else None
            if override is not None:
                host.dispatches[i] = (None, lambda *a_, _o=override, **_k: _o(list(a_)), a, k)
        if not self.persistent:
            self._w._next_alloc_id += 1
            runtime.execute(host, compiled.platform)
            return outputs
        if self.ranks is None:
            self._w._next_alloc_id += 1
            self.ranks = runtime.Ranks(host, compiled.platform)
        self.ranks.run(host, reset=self.reset)
        return outputs

    def alloc_tensor(self, shape, dtype, *, init=None, worker_id=0):
        """A resident tensor of ``shape`` and ``dtype`` (a torch or numpy
        dtype), zeros or a copy of ``init``."""
        self._open("alloc_tensor")
        shape = tuple(int(d) for d in shape)
        if init is not None:
            if tuple(init.shape) != shape:
                raise ValueError(f"alloc_tensor: init has shape {tuple(init.shape)}, not {shape}")
            data = init.clone() if hasattr(init, "clone") else np.array(init, copy=True)
        else:
            torch = sys.modules.get("torch")
            if torch is not None and isinstance(dtype, torch.dtype):
                data = torch.zeros(shape, dtype=dtype)
            else:
                data = np.zeros(shape, dtype=dtype)
        if data.dtype != dtype:
            raise ValueError(f"alloc_tensor: init is {data.dtype}, not {dtype}")
        tensor = DeviceTensor(data, worker_id)
        self._owned_tensors.add(tensor)
        return tensor

    def free_tensor(self, tensor, *, worker_id=None):
        tensor.freed = True
        self._owned_tensors.discard(tensor)

    def alloc_stacked_tensor(self, host, *, worker_ids=None):
        """Shard ``host[i]`` resident on worker ``worker_ids[i]``."""
        self._open("alloc_stacked_tensor")
        if len(host.shape) < 2:
            raise ValueError(f"alloc_stacked_tensor needs a [B, *tail] tensor (rank >= 2), got shape {tuple(host.shape)}")
        b, world = int(host.shape[0]), len(self.compiled.device_ids)
        ids = list(range(b)) if worker_ids is None else [int(w) for w in worker_ids]
        if len(ids) != b:
            raise ValueError(f"worker_ids has {len(ids)} entries; host leading dim is {b}")
        if len(set(ids)) != len(ids):
            raise ValueError(f"worker_ids must be distinct (one shard per worker), got {ids}")
        for w in ids:
            if not 0 <= w < world:
                raise ValueError(f"worker id {w} out of range [0, {world}) (world_size from device_ids)")
        shards = [self.alloc_tensor(tuple(host.shape[1:]), host.dtype, init=host[i], worker_id=w)
                  for i, w in enumerate(ids)]
        return StackedDeviceTensor(shards, tuple(host.shape), ids)

    def free_stacked_tensor(self, stacked):
        for shard in stacked.shards:
            self.free_tensor(shard)

    def copy_stacked_from(self, stacked, host):
        """Reads every shard back into ``host`` (``host[i]`` from shard i)."""
        for i, shard in enumerate(stacked.shards):
            host[i][...] = shard.value("copy_stacked_from")

    def release_inherited_host_tensor_refs(self):
        self._open("release_inherited_host_tensor_refs")
        self._inherited = ()


class _Allocations:
    def __init__(self):
        self._next_alloc_id = 0


def return_style(fn, args, kwargs):
    """PyPTO's two calling conventions: every argument (in place: the call
    returns None), or only the inputs, when the ``pl.Out`` tensors are
    allocated here (zeros of their annotated shape and dtype; torch tensors
    when the inputs are) and returned, one or a tuple in order. Returns the
    full argument list and what the call returns."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return args, None
    if kwargs or len(args) >= len(params):
        return args, None
    outs = [i for i, p in enumerate(params) if getattr(p.annotation, "kind", None) == "Out"]
    n_inputs = len(params) - len(outs)
    if not outs or len(args) != n_inputs:
        expected = f"{len(params)} (in place)" + (f" or {n_inputs} (return)" if outs else "")
        raise TypeError(
            f"{getattr(fn, '__name__', 'the program')} expects {expected} arguments, got {len(args)}; "
            f"parameters: {[p.name for p in params]}"
        )
    inputs = iter(args)
    full = [None if i in outs else next(inputs) for i in range(len(params))]
    # An output's shape may use a dynamic dimension the inputs bind.
    with dims.bound(fn, (), {p.name: a for p, a in zip(params, full) if a is not None}):
        for i in outs:
            full[i] = _zeros(params[i], args)
    made = [full[i] for i in outs]
    return full, made[0] if len(made) == 1 else tuple(made)


def _zeros(param, inputs):
    """A zero tensor for the ``pl.Out[pl.Tensor[shape, dtype]]`` parameter
    ``param``: torch when an input is a torch tensor, numpy otherwise."""
    tensor = getattr(param.annotation, "args", None)
    spec = getattr(tensor, "args", None)
    if getattr(tensor, "kind", None) != "Tensor" or not isinstance(spec, tuple) or len(spec) != 2:
        raise TypeError(f"output {param.name!r} is not annotated pl.Out[pl.Tensor[shape, dtype]]: pass it")
    shape, dtype = [int(d) for d in spec[0]], spec[1]
    torch = torch_of(inputs)
    if torch is not None:
        return torch.zeros(shape, dtype=getattr(torch, _TORCH[dtype.name]))
    np_dtype = kernel.np_dtype(dtype.name)
    if np_dtype is None:
        raise TypeError(f"output {param.name!r}: pld-pypto cannot allocate {dtype!r} as numpy; pass it")
    return np.zeros(shape, dtype=np_dtype)


# pl dtype name -> torch attribute.
_TORCH = {
    "fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64", "int64": "int64",
    "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}
