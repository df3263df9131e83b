"""``pypto.ir``: ``ir.compile(program, platform=, distributed_config=)``."""

from pld_pypto.program import compile_program as compile  # noqa: A001

from . import distributed_compiled_program  # noqa: F401

__all__ = ["compile", "distributed_compiled_program"]
