"""The device's errors, one exception class per kind of error, each a
subclass of ``PldError`` — so that a program catches the failure it can
handle (``except pld.errors.WaitTimeout``) and lets the others fail the
run. The classes and their names come from the Rust device's one list of
error kinds (``pld_sim::ErrorKind``): ``ERROR_KINDS`` lists them.

A failed kernel fails its run with the same class, its message naming the
rank and the program's line."""

from . import _native
from ._native import ERROR_KINDS, PldError

globals().update({name: getattr(_native, name) for name in ERROR_KINDS})

__all__ = ["ERROR_KINDS", "PldError", *ERROR_KINDS]
