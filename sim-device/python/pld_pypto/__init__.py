"""pld-pypto: run PyPTO distributed programs unmodified on pld ranks.

``pld-pypto SCRIPT.py [ARGS...]`` runs SCRIPT as ``__main__`` with the
modules ``pypto``, ``pypto.language``, ``pypto.language.distributed``,
``pypto.ir``, ``pypto.ir.distributed_compiled_program`` and
``pypto.runtime`` resolved to pld's implementation (only inside the
command). Every device rule lives in the Rust device (``pld-sim``), reached
through the ``_native`` extension; this package keeps to what only Python
can do: decorators, annotations, running each rank's kernel in a thread,
converting arrays.
"""

from . import errors
from ._native import PldError

__all__ = ["PldError", "errors"]
__version__ = "0.1.0"
