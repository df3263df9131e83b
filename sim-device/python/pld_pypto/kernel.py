"""The kernel layer: what a rank's kernel holds. A ``Tile`` is the Rust
device's tile (its share of on-chip memory, alignment checked there) with
a numpy copy of its values for the math; a ``DistributedTensor`` is this
rank's view of a window buffer; host arrays (numpy, or torch CPU tensors,
duck-typed) stay numpy views of the caller's memory, so ``pl.Out`` /
``pl.InOut`` results are written back in place."""

import sys

import numpy as np

from .host import ViewSpec, current_rank

# pld dtype name <-> numpy dtype.
class _Dtypes(dict):
    """numpy has no bf16: ml_dtypes' bfloat16 is a numpy dtype with bf16's
    bits and arithmetic, so bf16 data moves as bf16 (never through
    float32). Imported on first use (its import costs half a second)."""

    def __missing__(self, name):
        if name != "bf16":
            raise KeyError(name)
        return _bf16()


NP = _Dtypes({
    "fp32": np.float32,
    "fp16": np.float16,
    "fp64": np.float64,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "int64": np.int64,
})
NAME = {np.dtype(v): k for k, v in NP.items()}


def np_dtype(name):
    """The numpy dtype of pld dtype ``name``, or None."""
    try:
        return NP[name]
    except KeyError:
        return None


def _bf16():
    import ml_dtypes  # noqa: PLC0415 - see _Dtypes

    dict.__setitem__(NP, "bf16", ml_dtypes.bfloat16)
    NAME[np.dtype(ml_dtypes.bfloat16)] = "bf16"
    return ml_dtypes.bfloat16


def dtype_name(array):
    """The pld dtype of a numpy array."""
    if np.dtype(array.dtype).name == "bfloat16":
        _bf16()
    try:
        return NAME[np.dtype(array.dtype)]
    except KeyError:
        raise TypeError(f"arrays of {array.dtype} are not a pld dtype (fp32, fp16, bf16, fp64, int8/16/32/64)") from None


def as_numpy(x):
    """A numpy view of a host array: numpy as is, a torch CPU tensor
    through ``.detach().numpy()`` (the same memory, so writes reach the
    caller); anything else unchanged."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach") and hasattr(x, "numpy"):
        t = x.detach()
        if str(getattr(t, "dtype", "")) == "torch.bfloat16":
            # torch's bf16 cannot go through .numpy(): its int16 view can,
            # then viewed as bf16 (the same memory, bit for bit).
            return t.view(_torch_int16(t)).numpy().view(NP["bf16"])
        return t.numpy()
    return x


def _torch_int16(t):
    """``torch.int16`` (torch is loaded: ``t`` is one of its tensors;
    pld-pypto itself does not depend on torch)."""
    return sys.modules[type(t).__module__.split(".")[0]].int16


def rank():
    r = current_rank()
    if r is None:
        raise RuntimeError("this call runs inside a kernel (a function dispatched with device=r)")
    return r


class DistributedTensor:
    """This rank's view of a window buffer (``pld.DistributedTensor``)."""

    def __init__(self, buf, dims, dtype, name):
        self.buf, self.dims, self.dtype, self.name = buf, list(dims), dtype, name
        self.shape2 = rank().check_view(self.spec())

    def spec(self):
        return (self.buf, self.dims, self.dtype)

    @property
    def shape(self):
        return tuple(self.dims)

    def __repr__(self):
        return f"DistributedTensor({self.name!r}, {self.dims}, {self.dtype})"

    def values(self):
        """This rank's whole view, read through the device (a copy)."""
        raw = rank().read(self.spec())
        return np.frombuffer(raw, dtype=NP[self.dtype]).reshape(self.dims).copy()

    def region(self, key):
        """``(shape, offset)`` of ``key``: one contiguous slice ``a:b`` per
        dimension (PyPTO's window ``tensor.slice``)."""
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != len(self.dims):
            raise IndexError(f"{self!r}[...]: give one slice per dimension ({len(self.dims)})")
        shape, offset = [], []
        for k, d in zip(key, self.dims):
            if not isinstance(k, slice) or k.step not in (None, 1):
                raise IndexError(f"{self!r}[...]: window views take contiguous slices a:b per dimension, not {k!r}")
            start, stop = int(k.start or 0), int(d if k.stop is None else k.stop)
            if not 0 <= start <= stop <= d:
                raise IndexError(f"{self!r}[...]: {start}:{stop} is outside dimension 0:{d}")
            shape.append(stop - start)
            offset.append(start)
        return shape, offset

    def __getitem__(self, key):
        """``win[a:b, c:d]``: that region of this rank's view (a copy)."""
        shape, offset = self.region(key)
        return self.values()[tuple(slice(o, o + s) for o, s in zip(offset, shape))]

    def __setitem__(self, key, value):
        """``win[a:b, c:d] = x``: ``x`` stored into that region of this
        rank's view through the device (a tile's valid part, or a tensor)."""
        shape, offset = self.region(key)
        values = value.valid() if isinstance(value, Tile) else np.asarray(as_numpy(value))
        if values.size != int(np.prod(shape)):
            raise ValueError(f"{self!r}[...] = x: x has shape {list(values.shape)}, the region {shape}")
        self.write_region(values, shape, offset)

    def write_region(self, values, shape, offset):
        """``values`` into the ``shape`` region at ``offset`` of this rank's
        view: a put to this rank through the device (a tensor moves by DMA,
        so no tile alignment applies)."""
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        v2 = np.ascontiguousarray(np.asarray(values).reshape(rows, shape[-1]).astype(NP[self.dtype]))
        r = rank()
        region = (two_d(offset, "offsets"), [0, 0], [rows, shape[-1]])
        r.put(self.spec(), r.rank(), v2.tobytes(), [rows, shape[-1]], region=region, add=False)


def to_kernel_arg(a):
    """A dispatch argument as the kernel sees it."""
    if isinstance(a, ViewSpec):
        return DistributedTensor(a.buf.index, a.dims, a.dtype, a.buf.name)
    return as_numpy(a)


class Tile:
    """A tile on this rank's chip; its values are read from the device the
    first time the kernel's math needs them (a tile that only travels —
    ``remote_load`` then ``pl.store`` — never crosses into numpy)."""

    def __init__(self, native):
        self.native = native
        self._values = None

    def _parts(self):
        shape, valid, dtype, data = self.native.parts()
        self._shape, self._valid, self._dtype = list(shape), list(valid), dtype
        self._values = np.frombuffer(data, dtype=NP[dtype]).reshape(shape)

    def _lazy(field):  # noqa: N805 - a property factory, used in the class body
        def read(self):
            if self._values is None:
                self._parts()
            return getattr(self, field)

        return property(read)

    values = _lazy("_values")
    shape = _lazy("_shape")
    valid_shape = _lazy("_valid")
    dtype = _lazy("_dtype")
    del _lazy

    @classmethod
    def of(cls, values, valid=None):
        """A tile holding ``values`` (2-D), counted against the chip."""
        values = np.ascontiguousarray(values)
        if values.ndim == 1:
            values = values.reshape(1, -1)
        if values.ndim != 2:
            values = values.reshape(-1, values.shape[-1])
        shape = list(values.shape)
        return cls(rank().tile_from(values.tobytes(), shape, valid or shape, dtype_name(values)))

    def release(self):
        """Gives the tile's on-chip memory back (the planner's reuse of a
        dead operand); its values stay readable, the device tile is gone."""
        if self._values is None:
            self._parts()
        self.native = None

    def valid(self):
        r, c = self.valid_shape
        return self.values[:r, :c]

    def __repr__(self):
        return f"Tile({self.shape}, {self.dtype})"


def two_d(seq, what):
    if type(seq) is list and len(seq) == 2 and type(seq[0]) is int and type(seq[1]) is int:
        return seq
    seq = [int(v) for v in seq]
    if len(seq) == 1:
        return [0, seq[0]] if what == "offsets" else [1, seq[0]]
    if len(seq) != 2:
        raise ValueError(f"{what} {seq}: pld-pypto takes 2-D {what} for window views (collapse leading dims)")
    return seq
