"""``pypto.language.distributed``'s enums, declared once: the shim
re-exports them and the collectives take them."""

import enum


class NotifyOp(enum.Enum):
    """``pld.NotifyOp``."""

    Set = "Set"
    AtomicAdd = "AtomicAdd"


class WaitCmp(enum.Enum):
    """``pld.WaitCmp``."""

    Eq = "Eq"
    Ne = "Ne"
    Gt = "Gt"
    Ge = "Ge"
    Lt = "Lt"
    Le = "Le"


class AtomicType(enum.Enum):
    """``pld.AtomicType``."""

    None_ = "None"
    Add = "Add"


class ReduceOp(enum.Enum):
    """``pld.ReduceOp``."""

    Sum = "Sum"
    Max = "Max"
    Min = "Min"
    Prod = "Prod"


def member(call, what, value, cls):
    """``value`` as a member of ``cls`` for ``call``'s argument ``what``.
    Anything else is a ``TypeError`` naming the enum and its members — a
    string in its place (``op="AtomicAdd"``) is the usual slip, and must
    not pass as some other member or fail with an ``AttributeError`` from
    inside pld."""
    if isinstance(value, cls):
        return value
    names = ", ".join(f"pld.{cls.__name__}.{m.name}" for m in cls)
    hint = ""
    if isinstance(value, str) and value in cls.__members__:
        hint = f" (write pld.{cls.__name__}.{value})"
    raise TypeError(
        f"{call}: {what} must be a pld.{cls.__name__} ({names}), "
        f"not the {type(value).__name__} {value!r}{hint}"
    )
