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
