"""``with pl.at(...) as tid:`` tasks and deferred completion, eagerly.

A task's body runs where the kernel reaches it, as before, except in one
case: a task whose ``deps`` name a task that registered
``pld.system.defer_wait`` conditions. On the NPU that task completes only
once its conditions hold, which releases its core; the dependent task runs
then, and tasks submitted after it (a publisher) need not wait. Here the
dependent task's ops are recorded when the kernel reaches them and run when
the scope ends (``pl.manual_scope``'s exit, or the kernel's end): first a
wait for each condition of its deps (with the rank's deadline, naming the
signal), then its ops in program order. A recorded op returns a pending
value that later recorded ops take as their input; ``pl.store`` returns
its target, as it does when run. Conditions no task depends on are
registered with the device, which checks them when the kernel completes."""

import functools
import threading

_local = threading.local()


class Task:
    """``tid`` of ``with pl.at(...) as tid``."""

    def __init__(self, deps, name):
        self.deps, self.name = [d for d in deps or () if isinstance(d, Task)], name
        self.conditions = []  # (wait fn, args) that defer_wait registered
        self.ops = []  # (Pending, fn, args, kwargs) when deferred
        self.deferred = any(d.conditions or d.deferred for d in self.deps)

    def __enter__(self):
        stack = _stack()
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        if self.deferred or self.conditions:
            _pending().append(self)
        return False

    def __repr__(self):
        return f"TaskId({self.name or 'task'})"


class Pending:
    """The result of an op recorded in a deferred task."""

    def __init__(self, call):
        self.call, self.done, self.value = call, False, None

    def resolve(self):
        if not self.done:
            raise RuntimeError(
                f"{self.call} in a deferred task (it runs once the defer_wait it depends on holds) "
                "is used outside that task before it ran"
            )
        return self.value


def _stack():
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def _pending():
    p = getattr(_local, "pending", None)
    if p is None:
        p = _local.pending = []
    return p


def current():
    """The innermost task this thread is in, or None."""
    s = _stack()
    return s[-1] if s else None


def _deferring():
    return next((t for t in reversed(_stack()) if t.deferred), None)


def resolve(x):
    """``x``, or the value of the recorded op it is the result of."""
    return _resolve(x)


def _resolve(x):
    if isinstance(x, Pending):
        return x.resolve()
    if isinstance(x, (list, tuple)):
        return type(x)(_resolve(v) for v in x)
    return x


def deferrable(call, returns_target=None):
    """Wraps op ``fn`` (named ``call``): in a deferred task it is recorded;
    elsewhere it runs, its pending inputs resolved. ``returns_target``
    picks, from the arguments, what a recorded op returns (``pl.store``'s
    target) instead of a pending value."""

    def wrap(fn):
        @functools.wraps(fn)
        def op(*args, **kwargs):
            if not getattr(_local, "recorded", False):
                if not _stack():
                    return fn(*args, **kwargs)  # no task, nothing pending: the op as it was
            task = _deferring()
            if task is None:
                return fn(*_resolve(args), **{k: _resolve(v) for k, v in kwargs.items()})
            _local.recorded = True
            pending = Pending(call)
            task.ops.append((pending, fn, args, kwargs))
            return returns_target(*args, **kwargs) if returns_target else pending

        return op

    return wrap


def defer_wait(wait, register, args):
    """``pld.system.defer_wait`` in a task: the condition is the task's
    (``wait(*args)`` blocks until it holds; ``register(*args)`` hands it to
    the device). False outside any task."""
    task = current()
    if task is None:
        return False
    task.conditions.append((wait, register, args))
    return True


def flush():
    """Runs the deferred tasks of this scope in order (each after the
    conditions of its deps hold); registers with the device the
    conditions no deferred task waited for."""
    tasks, _local.pending = _pending(), []
    waited = set()
    for task in tasks:
        if task.deferred:
            for dep in task.deps:
                if id(dep) not in waited:
                    waited.add(id(dep))
                    for wait, _register, args in dep.conditions:
                        wait(*args)
            for pending, fn, args, kwargs in task.ops:
                pending.value = fn(*_resolve(args), **{k: _resolve(v) for k, v in kwargs.items()})
                pending.done = True
    for task in tasks:
        if id(task) not in waited:
            for _wait, register, args in task.conditions:
                register(*args)


def reset():
    """Forgets this thread's tasks (a kernel failed mid-scope)."""
    _local.stack, _local.pending, _local.recorded = [], [], False
