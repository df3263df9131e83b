"""PyPTO's memory planner, as far as an eager run can follow it: when a
tile op's result does not fit on chip, an operand tile that the kernel
can no longer reach takes the result's place (the compiler would have
given the result a dead operand's buffer: ``tile_f = pl.add(tile_a,
tile_b)`` with ``tile_a`` never read again). Only on that path: a program
that fits never has a tile released.

"Can no longer reach" is decided on the kernel's bytecode, conservatively:
every local naming the tile is never loaded after the current
instruction, the instruction is in no loop, and no closure captures it."""

import dis
import sys

from . import errors
from .kernel import Tile

_LOADS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_NAME"}
_BACK = {"JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE"}


def _live_after(code, lasti, name):
    if name in code.co_cellvars or name in code.co_freevars:
        return True
    for ins in dis.get_instructions(code):
        if ins.opname in _BACK and isinstance(ins.argval, int) and ins.argval <= lasti < ins.offset:
            return True  # in a loop: the next iteration may read it
        if ins.offset > lasti and ins.opname in _LOADS:
            names = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
            if name in names:
                return True
    return False


def _dead(tile, frame):
    names = [n for n, v in frame.f_locals.items() if v is tile]
    return all(not _live_after(frame.f_code, frame.f_lasti, n) for n in names)


def _kernel_frame():
    """The innermost frame outside pld-pypto and its ``pypto`` shim: the
    kernel that called the op (through however many wrappers)."""
    frame = sys._getframe(2)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").split(".")[0] in ("pld_pypto", "pypto"):
        frame = frame.f_back
    return frame


def fit(make, operands):
    """``make()`` (which allocates the result tile); when it does not fit
    on chip, releases the dead operand tiles of the kernel frame that
    called the op and tries once more."""
    try:
        return make()
    except errors.TileOverCapacity:
        frame = _kernel_frame()
        dead = [t for t in operands if isinstance(t, Tile) and t.native is not None and _dead(t, frame)]
        if not dead:
            raise
        for t in dead:
            t.release()
        return make()
