"""PyPTO's loops, run eagerly: ``pl.range`` / ``pl.parallel`` /
``pl.unroll`` / ``pl.pipeline`` with their positional ``(stop)``,
``(start, stop)`` or ``(start, stop, step)``, and loop-carried values —
``for i, (a, b) in pl.range(n, init_values=(x, y)):`` whose body ends in
``a2, b2 = pl.yield_(new_a, new_b)``: iteration k + 1 sees what iteration
k yielded, and after the loop the names bound to ``pl.yield_`` hold the
last values, as the compiled loop's SSA form says. Sequential here:
``parallel``, ``unroll`` and ``pipeline`` differ only in how a compiler
schedules the same iterations."""

import threading

_local = threading.local()


def _loops():
    """This thread's loops with carried values, innermost last."""
    stack = getattr(_local, "loops", None)
    if stack is None:
        stack = _local.loops = []
    return stack


class RangeIterator:
    """One loop: its index, and its carried values if it has any."""

    def __init__(self, func, args, init_values=None):
        if not 1 <= len(args) <= 3:
            raise ValueError(f"{func}() takes 1 to 3 positional arguments (stop / start, stop / start, stop, step)")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        self.func, self.start, self.stop, self.step = func, int(start), int(stop), int(step)
        if self.step == 0:
            raise ValueError(f"{func}(): the step must not be 0")
        self.carried = None if init_values is None else tuple(init_values)
        if self.carried is not None and not self.carried:
            raise ValueError(f"{func}(): init_values is empty; leave it out for a loop without carried values")
        self.current = self.start
        self.active = False

    def __iter__(self):
        return self

    def __next__(self):
        stack = _loops()
        done = self.current >= self.stop if self.step > 0 else self.current <= self.stop
        if done:
            if self.active:
                self._leave(stack)
            raise StopIteration
        if self.carried is not None and not self.active:
            stack.append(self)
            self.active = True
        value = self.current
        self.current += self.step
        return value if self.carried is None else (value, self.carried)

    def _leave(self, stack):
        self.active = False
        # A loop left by `break` inside this one is gone with it.
        while stack:
            if stack.pop() is self:
                break

    def take(self, values):
        if len(values) != len(self.carried):
            raise ValueError(
                f"pl.yield_ gives {len(values)} value(s) to a {self.func}() loop that carries "
                f"{len(self.carried)} (init_values)"
            )
        self.carried = tuple(values)


def range(*args, init_values=None):  # noqa: A001
    """``pl.range(stop)``, ``pl.range(start, stop[, step], init_values=...)``."""
    return RangeIterator("range", args, init_values)


def parallel(*args, init_values=None):
    """``pl.parallel``: ``pl.range``'s iterations, which may run in parallel."""
    return RangeIterator("parallel", args, init_values)


def unroll(*args):
    """``pl.unroll``: ``pl.range`` unrolled at compile time (no carried values)."""
    return RangeIterator("unroll", args)


def pipeline(*args, stage, init_values=None):
    """``pl.pipeline(..., stage=k)``: ``pl.range`` software-pipelined ``k`` deep."""
    if not isinstance(stage, int) or isinstance(stage, bool) or stage < 1:
        raise ValueError(f"pipeline() stage must be a positive integer, got {stage!r}")
    return RangeIterator("pipeline", args, init_values)


def yield_(*values):
    """``pl.yield_(v, ...)``: the values the innermost loop with carried
    values carries into its next iteration (and out of its last); returns
    them (one value, or a tuple)."""
    if not values:
        raise ValueError("pl.yield_ needs at least one value")
    stack = _loops()
    if stack:
        stack[-1].take(values)
    return values[0] if len(values) == 1 else values
