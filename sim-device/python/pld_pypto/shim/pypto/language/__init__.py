"""``pypto.language`` (``pl``) on pld: annotations, dtypes, decorators and
the tile/tensor ops of a kernel. Tile values are computed with numpy; every
tile is the Rust device's, so capacity and alignment are its rules."""

import builtins

import numpy as np
import types

from pld_pypto import dims, kernel, loops, ops, planner, tasks
from pld_pypto.kernel import DistributedTensor as _DT
from pld_pypto.kernel import Tile, as_numpy
from pld_pypto.program import FunctionType, Level, Role, function, jit, program

from . import distributed  # noqa: F401

__all__ = [
    "FunctionType", "Level", "Role", "function", "jit", "program", "Tensor", "Out", "InOut",
    "Scalar", "dynamic", "load", "store", "add", "sub", "mul", "div", "max", "min", "cast",
    "read", "write", "range", "parallel", "unroll", "pipeline", "yield_", "at", "Tile",
    "slice", "assemble", "create_tensor", "matmul", "move", "const", "reshape", "row_sum",
    "MemorySpace", "INDEX", "tile", "tensor", "array", "manual_scope",
]


class DataType:
    """A pl dtype (``pl.FP32``, ...)."""

    def __init__(self, name, nbytes, label=None):
        # `name` is the dtype the device moves; `label` the pl spelling.
        self.name, self.nbytes, self.label = name, nbytes, label or name.upper()

    def get_byte(self):
        return self.nbytes

    def __repr__(self):
        return f"pl.{self.label}"


FP32 = DataType("fp32", 4)
FP16 = DataType("fp16", 2)
BF16 = DataType("bf16", 2)
FP64 = DataType("fp64", 8)
INT32 = DataType("int32", 4)
INT16 = DataType("int16", 2)
INT8 = DataType("int8", 1)
INT64 = DataType("int64", 8)
UINT8 = DataType("uint8", 1)
BOOL = DataType("bool", 1)
# An index scalar (loop bounds, offsets): a 64-bit integer.
INDEX = DataType("int64", 8, "INDEX")


class _Annotation:
    """``pl.Tensor[[...], dtype]`` and friends: annotations only."""

    def __init__(self, kind, args):
        self.kind, self.args = kind, args

    def __repr__(self):
        return f"{self.kind}{list(self.args) if isinstance(self.args, tuple) else self.args}"


class _Subscriptable:
    def __init__(self, kind):
        self.kind = kind

    def __getitem__(self, item):
        return _Annotation(self.kind, item)


Tensor = _Subscriptable("Tensor")
Out = _Subscriptable("Out")
InOut = _Subscriptable("InOut")
Scalar = _Subscriptable("Scalar")


def dynamic(name):
    """``pl.dynamic(name)``: a dimension bound, per call, by the arguments
    whose annotations use it (``pld_pypto.dims``)."""
    return dims.DynVar(name)


range = loops.range  # noqa: A001
parallel = loops.parallel
unroll = loops.unroll
pipeline = loops.pipeline
yield_ = loops.yield_


def at(level=None, *, deps=None, name_hint=None, **_options):
    """``with pl.at(level=..., deps=[tid]) as tid``: a task. Placement is
    moot (kernels run where they are); a task whose deps registered
    ``pld.system.defer_wait`` runs once those conditions hold
    (``pld_pypto.tasks``)."""
    return tasks.Task(deps, name_hint)


def _offsets_shape(offsets, shape, ndim):
    offsets = [int(o) for o in offsets]
    shape = [int(s) for s in shape]
    if len(offsets) != len(shape):
        raise ValueError(f"offsets {offsets} and shape {shape} name different numbers of dimensions")
    if len(offsets) != ndim:
        raise ValueError(f"offsets {offsets} do not match a tensor of {ndim} dimensions")
    return offsets, shape


def load(tensor, offsets, shapes=None, valid_shape=None, target_memory=ops.MemorySpace.Vec, clamp=False, shape=None):
    """``pl.load``: a region of a local tensor or of this rank's window view
    into a tile (on chip: counted and aligned by the device). With
    ``valid_shape``, the tile has ``shapes`` and only its top-left
    ``valid_shape`` part is read (the rest is padding)."""
    shapes = shapes if shapes is not None else shape
    if isinstance(tensor, _DT):
        if len(offsets) > 2 or len(tensor.dims) > 2:
            return Tile(kernel.rank().load_nd(tensor.spec(), [int(o) for o in offsets], [int(s) for s in shapes]))
        valid = kernel.two_d(valid_shape, "shape") if valid_shape is not None else None
        tile = kernel.rank().load(tensor.spec(), kernel.two_d(offsets, "offsets"), kernel.two_d(shapes, "shape"), valid)
        return Tile(tile)
    a = as_numpy(tensor)
    if not isinstance(a, np.ndarray):
        raise TypeError(f"pl.load reads a Tensor or a DistributedTensor, not {type(tensor).__name__}")
    offsets, shapes = _offsets_shape(offsets, shapes, a.ndim)
    read = shapes
    if valid_shape is not None:
        read = [1] * (a.ndim - len(valid_shape)) + [int(v) for v in valid_shape]
        if len(read) != a.ndim or any(r > s for r, s in zip(read, shapes)):
            raise ValueError(f"pl.load: valid_shape {list(valid_shape)} does not fit in the tile's shape {shapes}")
    for o, s, d in zip(offsets, read, a.shape):
        if o < 0 or o + s > d:
            raise IndexError(f"pl.load: the region {read} at {offsets} does not fit in a tensor of shape {list(a.shape)}")
    block = a[tuple(builtins.slice(o, o + s) for o, s in zip(offsets, read))]
    values = block.reshape(-1, block.shape[-1]) if block.ndim != 2 else block
    if read == shapes:
        return Tile.of(values)
    rows, cols = ([1, shapes[-1]] if len(shapes) == 1 else [int(np.prod(shapes[:-1])), shapes[-1]])
    padded = np.zeros((rows, cols), dtype=values.dtype)
    padded[: values.shape[0], : values.shape[1]] = values
    return Tile.of(padded, [values.shape[0], values.shape[1]])


def store(tile, offsets, output_tensor, shapes=None, *, atomic=None):
    """``pl.store(tile, offsets, output_tensor, shapes=None, *, atomic=...)``:
    a tile's valid part into a local tensor or this rank's window view;
    returns ``output_tensor`` (the rebind idiom)."""
    if atomic is not None and getattr(atomic, "value", atomic) != "None":
        return ops.assemble(output_tensor, tile, offsets, atomic=atomic)
    dst = output_tensor
    if not isinstance(tile, Tile):
        raise TypeError(f"pl.store stores a tile, not {type(tile).__name__}")
    if tile.native is None:
        raise RuntimeError("pl.store: this tile's on-chip memory went to a later op's result (it was not read again)")
    if isinstance(dst, _DT):
        kernel.rank().store(tile.native, kernel.two_d(offsets, "offsets"), dst.spec())
        return dst
    a = as_numpy(dst)
    v = tile.valid()
    offsets = [int(o) for o in offsets]
    region = [1] * (a.ndim - 2) + list(v.shape) if a.ndim >= 2 else [v.size]
    if len(offsets) != a.ndim:
        raise ValueError(f"offsets {offsets} do not match a tensor of {a.ndim} dimensions")
    for o, s, d in zip(offsets, region, a.shape):
        if o < 0 or o + s > d:
            raise IndexError(f"pl.store: a [{v.shape[0]}, {v.shape[1]}] tile at {offsets} does not fit in {list(a.shape)}")
    a[tuple(builtins.slice(o, o + s) for o, s in zip(offsets, region))] = v.reshape(region).astype(a.dtype)
    return dst


def _values(x):
    if isinstance(x, Tile):
        return x.values
    if isinstance(x, (int, float)):
        return x
    a = as_numpy(x)
    if isinstance(a, np.ndarray):
        return a
    raise TypeError(f"{type(x).__name__} is not a tile, tensor or scalar")


def _binary(name, f):
    def op(a, b):
        va, vb = _values(a), _values(b)
        out = f(va, vb)
        tiles = [t for t in (a, b) if isinstance(t, Tile)]
        if tiles:
            if isinstance(va, np.ndarray) and isinstance(vb, np.ndarray) and va.shape != vb.shape:
                raise ValueError(f"pl.{name}: shapes {list(va.shape)} and {list(vb.shape)} differ; give operands of one shape")
            result = np.asarray(out, dtype=tiles[0].values.dtype)
            return planner.fit(lambda: Tile.of(result, tiles[0].valid_shape), tiles)
        return out

    op.__name__ = name
    return op


add = _binary("add", np.add)
sub = _binary("sub", np.subtract)
mul = _binary("mul", np.multiply)
div = _binary("div", np.divide)
max = _binary("max", np.maximum)  # noqa: A001
min = _binary("min", np.minimum)  # noqa: A001


def cast(input, target_type, mode="round"):  # noqa: A002
    """``pl.cast(input, target_type, mode="round")``: a tile, tensor or
    scalar converted to ``target_type`` (numpy rounds to nearest even)."""
    if mode not in ("round", 2, "rint", 1, "none", 0):
        raise ValueError(f"pl.cast: pld-pypto rounds to nearest (mode='round'); mode={mode!r} is not supported")
    np_dtype = kernel.np_dtype(target_type.name)
    if np_dtype is None:
        raise TypeError(f"pl.cast to {target_type!r}: pld-pypto moves fp32, fp16, bf16, fp64 and int8/16/32/64")
    if isinstance(input, Tile):
        return Tile.of(input.values.astype(np_dtype), input.valid_shape)
    if isinstance(input, (int, float, np.generic)):
        return np_dtype(input).item()
    return as_numpy(input).astype(np_dtype)


def read(src, indices):
    """``pl.read``: one element of a tensor or of this rank's window view."""
    idx = tuple(int(i) for i in indices)
    if isinstance(src, _DT):
        raw = kernel.rank().read(src.spec())
        values = np.frombuffer(raw, dtype=kernel.NP[src.dtype]).reshape(src.shape2)
        return values[idx if len(idx) == 2 else (0, idx[-1])].item()
    return as_numpy(src)[idx].item()


def write(dst, indices, value):
    """``pl.write``: one element of a local tensor or of this rank's window view."""
    if isinstance(dst, _DT):
        idx = [int(i) for i in indices]
        dst.write_region(np.array([value]), [1] * len(idx), idx)
        return dst
    as_numpy(dst)[tuple(int(i) for i in indices)] = value
    return dst


slice = ops.slice  # noqa: A001
assemble = ops.assemble
create_tensor = ops.create_tensor
matmul = ops.matmul
move = ops.move
const = ops.const
reshape = ops.reshape
row_sum = ops.row_sum
MemorySpace = ops.MemorySpace


class manual_scope:  # noqa: N801 - PyPTO's spelling
    """``with pl.manual_scope():``: on the NPU, dependency tracking is off
    and the program declares its edges; on pld a kernel's calls run in
    program order, which honours every edge such a scope declares, except
    a task deferred on a ``defer_wait``: those run at the scope's end."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            tasks.flush()
        return False


# Ops a deferred task records (pld_pypto.tasks): each returns a pending
# value there, except the stores, which return their target as they do.
load = tasks.deferrable("pl.load")(load)
store = tasks.deferrable("pl.store", lambda tile, offsets, output_tensor=None, *a, **k: (
    output_tensor if output_tensor is not None else k.get("output_tensor")))(store)
add, sub, mul, div = (tasks.deferrable(f"pl.{f.__name__}")(f) for f in (add, sub, mul, div))
max = tasks.deferrable("pl.max")(max)  # noqa: A001
min = tasks.deferrable("pl.min")(min)  # noqa: A001
cast, read = tasks.deferrable("pl.cast")(cast), tasks.deferrable("pl.read")(read)
write = tasks.deferrable("pl.write")(write)
slice = tasks.deferrable("pl.slice")(slice)  # noqa: A001
assemble = tasks.deferrable("pl.assemble", lambda target, *a, **k: target)(assemble)
matmul, move = tasks.deferrable("pl.matmul")(matmul), tasks.deferrable("pl.move")(move)
reshape, row_sum = tasks.deferrable("pl.reshape")(reshape), tasks.deferrable("pl.row_sum")(row_sum)


# ``pl.tensor.*`` and ``pl.tile.*``: the tier-specific spellings of the ops
# above (one implementation each, which accepts its tier's operands).
tensor = types.SimpleNamespace(
    add=add, sub=sub, mul=mul, div=div, maximum=max, minimum=min, cast=cast, slice=slice,
    assemble=assemble, create=ops.create_tensor, matmul=matmul, reshape=reshape,
    row_sum=row_sum, read=read, write=write,
)
tile = types.SimpleNamespace(
    load=load, store=store, add=add, sub=sub, mul=mul, div=div, maximum=max, minimum=min, cast=cast,
    full=ops.full, create=ops.create, row_sum=row_sum, reshape=reshape, slice=slice,
    assemble=assemble, move=move, matmul=matmul,
)
array = types.SimpleNamespace(create=ops.array_create, get_element=ops.array_get, update_element=ops.array_update)
