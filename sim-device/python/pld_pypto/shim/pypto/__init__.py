"""pld's implementation of the ``pypto`` modules that distributed
programs import (resolved here only inside the ``pld-pypto`` command)."""

from . import ir, language, runtime  # noqa: F401

__pld__ = True
