"""``pld-pypto [OPTIONS] SCRIPT.py [ARGS...]``: runs SCRIPT as
``__main__`` with ``pypto`` resolved to pld's implementation."""

import argparse
import os
import runpy
import sys
import traceback

from .options import OPTIONS
from .runtime import RacesFound

SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim")


VALUED = ("--transport", "--daemons", "--token", "--timeout")


def _checked_flag(argv):
    """A bare ``--checked`` before the script means ``--checked=on`` (so
    that it does not take the script's name for its value)."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in VALUED:
            out += argv[i:i + 2]
            i += 2
            continue
        if a == "--checked":
            out.append("--checked=on")
        elif not a.startswith("-"):
            return out + argv[i:]
        else:
            out.append(a)
        i += 1
    return out


def main(argv=None):
    argv = _checked_flag(list(sys.argv[1:] if argv is None else argv))
    p = argparse.ArgumentParser(
        prog="pld-pypto",
        description="Run a PyPTO distributed program on pld ranks: one rank per -d device id, "
        "embedded over loopback by default, or on running daemons with --daemons.",
    )
    p.add_argument("--transport", choices=["quic", "tcp"], default=OPTIONS.transport,
                   help="the peer transport of the embedded ranks (default quic, mutual TLS)")
    p.add_argument("--daemons", default=",".join(OPTIONS.daemons),
                   help="run on these daemons' gRPC addresses, device id i on the i-th (or PLD_DAEMONS)")
    p.add_argument("--token", default=OPTIONS.token, help="the daemons' client token (or PLD_CLIENT_TOKEN)")
    p.add_argument("--timeout", type=float, default=OPTIONS.timeout_s,
                   help="seconds a wait or barrier may take before it fails naming what is missing")
    p.add_argument("--checked", nargs="?", const="on", default=OPTIONS.checked, choices=["on", "strict", "off"],
                   help="run every rank as a race detector: accesses no barrier, wait or atomic orders are "
                   "reported once each and fail the run (strict: the racing op fails too)")
    p.add_argument("--trace", metavar="FILE", default=OPTIONS.trace,
                   help="write the embedded ranks' timeline (ops, barriers, waits, races) to FILE as "
                   "Chrome trace-event JSON, for ui.perfetto.dev (or PLD_TRACE)")
    p.add_argument("script", help="the program, run as __main__")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the program's own arguments")
    ns = p.parse_args(argv)
    OPTIONS.transport = ns.transport
    OPTIONS.daemons = [d for d in ns.daemons.split(",") if d]
    OPTIONS.token = ns.token
    OPTIONS.timeout_s = ns.timeout
    OPTIONS.checked = ns.checked
    OPTIONS.trace = ns.trace
    if ns.trace:
        # Written at the end of the run: find out now that it cannot be.
        try:
            with open(ns.trace, "a", encoding="utf-8"):
                pass
        except OSError as e:
            p.error(f"--trace {ns.trace}: cannot write there: {e.strerror or e}")
    # `pypto` is ours for this command only: the shim directory goes first
    # on the path of this process, nowhere else.
    sys.path.insert(0, SHIM)
    sys.path.insert(1, os.path.dirname(os.path.abspath(ns.script)))
    sys.argv = [ns.script, *ns.args]
    try:
        runpy.run_path(ns.script, run_name="__main__")
    except SystemExit:
        raise
    except RacesFound as e:
        print(f"pld-pypto: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - a failed program: its traceback, then one line
        traceback.print_exc()
        print(f"pld-pypto: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
