"""The tensor- and tile-level ops of ``pypto.language`` beyond load/store
and the element-wise math, run eagerly with the published signatures:
``pl.slice`` / ``pl.assemble`` (and their ``pl.tensor.*`` forms), window
slicing ``win[a:b, c:d]``, ``pl.create_tensor``, ``pl.matmul``,
``pl.move``, ``pl.const`` and the tile constructors and reductions
(``pl.tile.full`` / ``create`` / ``row_sum`` / ``reshape``).

A tile is always the device's tile (its size and alignment checked in
Rust); a window view is read and written only through the device (so the
device's region checks and ``--checked`` see every access)."""

import builtins
import enum

import numpy as np

from . import kernel
from .host import current_host, current_rank
from .kernel import DistributedTensor, Tile, as_numpy


class MemorySpace(enum.Enum):
    """``pl.MemorySpace``: where a tile lives on the NPU. On pld a tile is
    one buffer of the rank's chip whatever its space; ``pl.move`` between
    spaces keeps its values."""

    DDR = "DDR"
    Vec = "Vec"
    Mat = "Mat"
    Left = "Left"
    Right = "Right"
    Acc = "Acc"
    Bias = "Bias"
    LeftScale = "LeftScale"
    RightScale = "RightScale"


def _np_dtype(call, dtype):
    np_dtype = kernel.np_dtype(getattr(dtype, "name", None))
    if np_dtype is None:
        raise TypeError(f"{call}: dtype {dtype!r} is not one pld-pypto moves (fp32, fp16, bf16, fp64, int8/16/32/64)")
    return np_dtype


def _ints(call, what, seq):
    try:
        return [int(v) for v in seq]
    except (TypeError, ValueError):
        raise TypeError(f"{call}: {what} must be a list of integers, got {seq!r}") from None


def _region(call, shape, offset, dims):
    """Checks that the ``shape`` region at ``offset`` fits in ``dims``."""
    shape, offset = _ints(call, "shape", shape), _ints(call, "offset", offset)
    if len(shape) != len(dims) or len(offset) != len(dims):
        raise ValueError(f"{call}: shape {shape} and offset {offset} must have {len(dims)} dims, as the source {list(dims)}")
    for o, s, d in zip(offset, shape, dims):
        if o < 0 or s < 0 or o + s > d:
            raise IndexError(f"{call}: the region {shape} at {offset} does not fit in a tensor of shape {list(dims)}")
    return shape, offset


def _window_values(call, dt, shape, offset):
    """The ``shape`` region at ``offset`` of this rank's window view, read
    through the device (a tensor region moves by DMA: no tile, so no tile
    alignment)."""
    shape, offset = _region(call, shape, offset, dt.dims)
    return dt.values()[tuple(builtins.slice(o, o + s) for o, s in zip(offset, shape))]


def slice(input, shape, offset, valid_shape=None, drop_dims=None, pad_value=None, clamp=False):  # noqa: A001, A002
    """``pl.slice(input, shape, offset, valid_shape=None, drop_dims=None,
    pad_value=None, clamp=False)``: the ``shape`` region of a tensor (a
    copy) or of this rank's window view (read through the device). With
    ``valid_shape``, only that part is read and the rest is ``pad_value``
    (0 by default); ``drop_dims`` removes unit dimensions."""
    if isinstance(input, Tile):
        src = input.values
    elif isinstance(input, DistributedTensor):
        src = None
    else:
        src = as_numpy(input)
        if not isinstance(src, np.ndarray):
            raise TypeError(f"pl.slice slices a tensor, a window view or a tile, not {type(input).__name__}")
    dims = input.dims if src is None else list(src.shape)
    shape, offset = _ints("pl.slice", "shape", shape), _ints("pl.slice", "offset", offset)
    read = shape if valid_shape is None else _ints("pl.slice", "valid_shape", valid_shape)
    if clamp:
        read = [builtins.max(0, builtins.min(r, d - o)) for r, d, o in zip(read, dims, offset)]
    if len(read) != len(shape) or any(r > s for r, s in zip(read, shape)):
        raise ValueError(f"pl.slice: valid_shape {read} does not fit in the slice's shape {shape}")
    if src is None:
        part = _window_values("pl.slice", input, read, offset)
    else:
        _region("pl.slice", read, offset, dims)
        part = src[tuple(builtins.slice(o, o + r) for o, r in zip(offset, read))]
    out = np.full(shape, 0 if pad_value is None else pad_value, dtype=part.dtype)
    out[tuple(builtins.slice(0, r) for r in read)] = part
    if drop_dims:
        drop = {int(d) for d in drop_dims}
        if any(shape[d] != 1 for d in drop):
            raise ValueError(f"pl.slice: drop_dims {sorted(drop)} must name dimensions of size 1 in {shape}")
        out = out.reshape([s for i, s in enumerate(shape) if i not in drop])
    if isinstance(input, Tile):
        return Tile.of(out)
    return out


def assemble(target, source, offset, *, atomic=None):
    """``pl.assemble(target, source, offset, *, atomic=AtomicType.None_)``:
    ``source`` written into ``target`` at ``offset`` (a local tensor in
    place, or this rank's window view through the device); returns
    ``target``. ``atomic=AtomicType.Add`` adds instead of writing."""
    add = atomic is not None and getattr(atomic, "value", atomic) == "Add"
    values = source.valid() if isinstance(source, Tile) else as_numpy(source)
    if not isinstance(values, np.ndarray):
        raise TypeError(f"pl.assemble writes a tensor or a tile, not {type(source).__name__}")
    if isinstance(target, DistributedTensor):
        if add:
            raise ValueError("pl.assemble(atomic=Add) into a window view: use pld.tensor.put(..., atomic=Add)")
        offset = _ints("pl.assemble", "offset", offset)
        shape = [1] * (len(target.dims) - values.ndim) + list(values.shape)
        _region("pl.assemble", shape, offset, target.dims)
        target.write_region(values, shape, offset)
        return target
    a = as_numpy(target)
    if not isinstance(a, np.ndarray):
        raise TypeError(f"pl.assemble writes into a tensor or a window view, not {type(target).__name__}")
    offset = _ints("pl.assemble", "offset", offset)
    shape = [1] * (a.ndim - values.ndim) + list(values.shape)
    _region("pl.assemble", shape, offset, a.shape)
    at = tuple(builtins.slice(o, o + s) for o, s in zip(offset, shape))
    v = values.reshape(shape).astype(a.dtype)
    if add:
        a[at] += v
    else:
        a[at] = v
    return target


def create_tensor(shape, dtype, layout=None):
    """``pl.create_tensor(shape, dtype=...)``: a local tensor of zeros; on
    the host, a torch tensor when the program was called with torch's."""
    shape = _ints("pl.create_tensor", "shape", shape)
    host = current_host()
    if host is not None and host.torch is not None and current_rank() is None:
        a = np.zeros(shape, dtype=_np_dtype("pl.create_tensor", dtype))
        if getattr(dtype, "name", None) == "bf16":
            return host.torch.from_numpy(a.view(np.int16)).view(host.torch.bfloat16)
        return host.torch.from_numpy(a)
    return np.zeros(shape, dtype=_np_dtype("pl.create_tensor", dtype))


def matmul(lhs, rhs, out_dtype=None, a_trans=False, b_trans=False, c_matrix_nz=False):
    """``pl.matmul(lhs, rhs, out_dtype=None, a_trans=False, b_trans=False)``:
    a tile (on chip) or tensor product; fp32 accumulation, as the cube
    unit's accumulator."""
    a = lhs.valid() if isinstance(lhs, Tile) else as_numpy(lhs)
    b = rhs.valid() if isinstance(rhs, Tile) else as_numpy(rhs)
    if a_trans:
        a = np.swapaxes(a, -1, -2)
    if b_trans:
        b = np.swapaxes(b, -1, -2)
    if a.shape[-1] != b.shape[0 if b.ndim == 1 else -2]:
        raise ValueError(f"pl.matmul: inner dimensions differ: {list(a.shape)} @ {list(b.shape)}")
    out = np.matmul(a.astype(np.float32), b.astype(np.float32))
    if out_dtype is not None:
        out = out.astype(_np_dtype("pl.matmul", out_dtype))
    if isinstance(lhs, Tile) or isinstance(rhs, Tile):
        return Tile.of(out)
    return out


def move(tile, target_memory, blayout=None, slayout=None):
    """``pl.move(tile, target_memory=...)``: the tile in another memory
    space; on pld its values, unchanged."""
    if not isinstance(tile, Tile):
        raise TypeError(f"pl.move moves a tile, not {type(tile).__name__}")
    if not isinstance(target_memory, MemorySpace):
        raise TypeError(f"pl.move: target_memory must be a pl.MemorySpace, got {target_memory!r}")
    return tile


def const(value, dtype):
    """``pl.const(value, dtype)``: ``value`` as a scalar of ``dtype``."""
    return _np_dtype("pl.const", dtype)(value).item()


def full(shape, dtype, value):
    """``pl.tile.full(shape, dtype, value)``: a tile filled with ``value``."""
    return Tile.of(np.full(_ints("pl.tile.full", "shape", shape), value, dtype=_np_dtype("pl.tile.full", dtype)))


def create(shape, dtype, target_memory=MemorySpace.Vec, transpose=None, *, flat_layout=None):
    """``pl.tile.create(shape, dtype, target_memory=Vec)``: a tile of zeros."""
    return full(shape, dtype, 0)


def row_sum(input, tmp_tile=None):  # noqa: A002
    """``pl.row_sum(input, tmp_tile)``: each row's sum, ``[rows, 1]``; a
    tile needs its scratch tile (same dtype, at least as large), as on the
    NPU; a tensor must not be given one."""
    if isinstance(input, Tile):
        if not isinstance(tmp_tile, Tile):
            raise TypeError("pl.row_sum of a tile needs tmp_tile: a scratch tile at least as large as the input")
        if tmp_tile.dtype != input.dtype or any(t < s for t, s in zip(tmp_tile.shape, input.shape)):
            raise ValueError(
                f"pl.row_sum: tmp_tile {tmp_tile.shape} {tmp_tile.dtype} must have the input's dtype "
                f"({input.dtype}) and be at least {input.shape}"
            )
        v = input.valid()
        return Tile.of(v.sum(axis=-1, keepdims=True, dtype=v.dtype))
    if tmp_tile is not None:
        raise ValueError("pl.row_sum of a tensor takes no tmp_tile (it is allocated when the tensor is lowered)")
    a = as_numpy(input)
    return a.sum(axis=-1, keepdims=True, dtype=a.dtype)


def reshape(input, shape):  # noqa: A002
    """``pl.reshape(input, shape)``: the same elements in ``shape``."""
    shape = _ints("pl.reshape", "shape", shape)
    if isinstance(input, Tile):
        v = input.values
        if v.size != int(np.prod(shape)):
            raise ValueError(f"pl.reshape: a {input.shape} tile has {v.size} elements, not the {int(np.prod(shape))} of {shape}")
        if list(input.valid_shape) != list(input.shape):
            raise ValueError(f"pl.reshape: a partly valid tile ({input.valid_shape} of {input.shape}) cannot change shape")
        return Tile.of(v.reshape(shape))
    return as_numpy(input).reshape(shape)


def array_create(extent, dtype):
    """``pl.array.create(extent, dtype)``: a 1-D scalar array of zeros (on
    the NPU, scalar registers; here a small local array)."""
    return np.zeros(int(extent), dtype=_np_dtype("pl.array.create", dtype))


def array_get(array, index):
    """``pl.array.get_element(array, index)``."""
    return array[int(index)].item()


def array_update(array, index, value):
    """``pl.array.update_element(array, index, value)``: ``array``, updated."""
    array[int(index)] = value
    return array
