"""``pl.dynamic(name)``: a dimension known only when the program runs. A
function's annotations (``x: pl.Tensor[[NR, SIZE], pl.FP32]``) bind it
from the argument actually passed, for the duration of the call, as
PyPTO's runtime binds a dynamic shape; inside, ``NR`` is that integer
(``pl.range(NR)``, ``NR * SIZE``, ``row < NR``). A dynamic dimension used
where no call bound it is an error naming it."""

import contextlib
import inspect
import operator
import threading

_local = threading.local()


def _frames():
    stack = getattr(_local, "frames", None)
    if stack is None:
        stack = _local.frames = []
    return stack


class DynVar:
    """A dynamic dimension; an integer while a call binds it."""

    def __init__(self, name):
        self.name = name

    def value(self):
        for frame in reversed(_frames()):
            if id(self) in frame:
                return frame[id(self)]
        raise NameError(
            f"pl.dynamic({self.name!r}) has no value here: it is bound by a call whose argument annotation "
            f"uses it (e.g. x: pl.Tensor[[{self.name}, ...], ...])"
        )

    def __index__(self):
        return self.value()

    __int__ = __index__

    def __repr__(self):
        return f"pl.dynamic({self.name!r})"

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other or (not isinstance(other, DynVar) and self.value() == other)


class DynExpr(DynVar):
    """Arithmetic on a dynamic dimension outside any call binding it (in an
    annotation: ``pl.Tensor[[M * 2, N], ...]``): evaluated when used."""

    def __init__(self, op, a, b):
        super().__init__(f"{a!r} {op.__name__} {b!r}")
        self.op, self.a, self.b = op, a, b

    def value(self):
        def v(x):
            return x.value() if isinstance(x, DynVar) else x

        return self.op(v(self.a), v(self.b))

    def solve(self, got):
        """``(var, value)`` binding this expression's one dynamic variable
        so that it equals ``got`` (``M * 2``, ``M + 1``, ``2 * M``...), or
        None when it is not of that form."""
        var, k = (self.a, self.b) if isinstance(self.a, DynVar) else (self.b, self.a)
        if type(var) is not DynVar or isinstance(k, DynVar):
            return None
        if self.op is operator.mul and k and got % k == 0:
            return var, got // k
        if self.op is operator.add:
            return var, got - k
        if self.op is operator.sub and var is self.a:
            return var, got + k
        return None


def _arith(op, reflected=False):
    def f(self, other):
        a, b = (other, self) if reflected else (self, other)
        try:
            return op(int(a), int(b))
        except NameError:
            return DynExpr(op, a, b)

    return f


def _compare(op):
    def f(self, other):
        return op(self.value(), int(other) if isinstance(other, DynVar) else other)

    return f


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("floordiv", operator.floordiv), ("mod", operator.mod)):
    setattr(DynVar, f"__{_name}__", _arith(_op))
    setattr(DynVar, f"__r{_name}__", _arith(_op, reflected=True))
for _name, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge)):
    setattr(DynVar, f"__{_name}__", _compare(_op))


def _shape_of(annotation):
    """The shape list an argument annotation declares, or None."""
    kind = getattr(annotation, "kind", None)
    args = getattr(annotation, "args", None)
    if kind in ("Out", "InOut"):
        return _shape_of(args)
    if kind == "Tensor" and isinstance(args, tuple) and args and isinstance(args[0], (list, tuple)):
        return args[0]
    if isinstance(annotation, tuple) and len(annotation) == 2 and annotation[0] == "DistributedTensor":
        item = annotation[1]
        if isinstance(item, tuple) and item and isinstance(item[0], (list, tuple)):
            return item[0]
    return None


def _actual_dims(value):
    dims = getattr(value, "dims", None)
    if dims is None:
        dims = getattr(value, "shape", None)
    return None if dims is None else [int(d) for d in dims]


@contextlib.contextmanager
def bound(fn, args, kwargs):
    """Binds the dynamic dimensions in ``fn``'s annotations from the
    arguments of this call, for its duration."""
    frame = {}
    try:
        sig = inspect.signature(fn)
        call = sig.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        call = None
    if call is not None:
        for name, value in call.arguments.items():
            shape = _shape_of(sig.parameters[name].annotation)
            dims = _actual_dims(value) if shape is not None else None
            if dims is None or len(dims) != len(shape):
                continue
            for want, got in zip(shape, dims):
                if type(want) is DynVar:
                    frame[id(want)] = got
                elif isinstance(want, DynExpr):
                    solved = want.solve(got)
                    if solved is not None:
                        frame[id(solved[0])] = solved[1]
    stack = _frames()
    stack.append(frame)
    try:
        yield
    finally:
        stack.pop()
