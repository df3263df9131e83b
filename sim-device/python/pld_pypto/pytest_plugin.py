"""A pytest plugin that runs PyPTO's distributed system tests on pld.

``pytest -p pld_pypto.pytest_plugin --confcutdir tests/st/distributed
tests/st/distributed`` (from a PyPTO checkout), or with ``PLD_PYPTO=1`` in
the environment, where the plugin loads by itself (the ``pytest11`` entry
point, `pld_pypto.pytest_entry`). For the session, ``pypto`` resolves to pld's implementation (the
shim ``pld-pypto`` uses), and the plugin provides what PyPTO's own
``tests/st/conftest.py`` provides these tests: the ``test_config`` (a
``RunConfig``) and ``device_ids`` fixtures, and the options ``--platform``,
``--device`` (``0``, ``0-3``, ``0,1,12``) and ``--codegen-only``; plus
pld's own ``--transport``, ``--daemons``, ``--checked`` (also spelled
``--pld-...``) and ``--pld-timeout``. Tests that assert on generated code
are skipped as out of scope (``upstream_scope``). ``--confcutdir`` keeps the upstream conftest (which
imports the vendor harness) out.
"""

import os
import sys

import pytest

from . import upstream_scope
from .options import OPTIONS

SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim")


def _option(parser, *names, **kwargs):
    """Adds an option unless a conftest already did (PyPTO's, if it is kept)."""
    try:
        parser.addoption(*names, **kwargs)
    except ValueError:
        pass


def _pld_option(group, name, **kwargs):
    """``--pld-NAME``, and ``--NAME`` too unless another plugin has it."""
    try:
        group.addoption(f"--pld-{name}", f"--{name}", dest=f"pld_{name}", **kwargs)
    except ValueError:
        group.addoption(f"--pld-{name}", dest=f"pld_{name}", **kwargs)


def pytest_addoption(parser):
    _option(parser, "--platform", action="store", default="a2a3sim",
            help="PyPTO's platform: a2a3sim / a2a3 (184 KiB on chip) or a5sim / a5 (240 KiB); "
            "comma-separated, the first is used")
    _option(parser, "--device", action="store", default="0,1",
            help="device ids, one pld rank each: '0', '0-3', '0,1,12' or mixed (default 0,1)")
    _option(parser, "--codegen-only", action="store_true", default=False,
            help="PyPTO's code generation only: the tests skip at execution")
    group = parser.getgroup("pld-pypto", "PyPTO programs on pld ranks")
    _pld_option(group, "transport", choices=["quic", "tcp"], default=None,
                help="the embedded ranks' peer transport (default quic, mutual TLS)")
    _pld_option(group, "daemons", default=None,
                help="run on running daemons' gRPC addresses, device id i on the i-th")
    _pld_option(group, "checked", nargs="?", const="on", default=None, choices=["on", "strict", "off"],
                help="run every rank as a race detector; a race fails the test that made it")
    group.addoption("--pld-run-codegen-tests", action="store_true", default=False,
                    help="run the tests that assert on generated code too (out of scope: they fail on pld)")
    group.addoption("--pld-timeout", type=float, default=None,
                    help="seconds a wait or barrier may take before it fails naming what is missing")


#: The most devices one ``--device`` may list: each is a pld rank in this
#: process, and a range must not build a list larger than any run.
MAX_DEVICES = 1024


def parse_devices(raw):
    """``--device`` as PyPTO's conftest reads it: ids, inclusive ranges and
    lists, mixed (``0-3,8,12-15``); at least one device, at most
    ``MAX_DEVICES``."""
    text = str(raw).strip()
    if not text:
        raise pytest.UsageError("--device must not be empty")
    devices = []
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        try:
            if "-" in token:
                start, end = (int(x) for x in token.split("-", 1))
                if end < start:
                    raise pytest.UsageError(f"--device range must be non-decreasing, got {token!r}")
                count = end - start + 1
            else:
                start = end = int(token)
                count = 1
        except ValueError:
            raise pytest.UsageError(f"--device takes ids, ranges and lists, got {raw!r}") from None
        # Counted before the list is built: '0-1000000000' is refused,
        # not materialised.
        if len(devices) + count > MAX_DEVICES:
            raise pytest.UsageError(
                f"--device {raw!r} lists more than {MAX_DEVICES} devices (one pld rank each, in this process)"
            )
        devices.extend(range(start, end + 1))
    if not devices:
        raise pytest.UsageError(f"--device {raw!r} lists no device")
    if len(set(devices)) != len(devices):
        raise pytest.UsageError(f"--device lists a device twice: {raw!r}")
    return devices


def pytest_configure(config):
    # `pypto` is pld's for this session: the shim goes first on the path,
    # and a `pypto` imported before (a site install) is forgotten.
    if SHIM not in sys.path:
        sys.path.insert(0, SHIM)
    for name in [m for m in sys.modules if m == "pypto" or m.startswith("pypto.")]:
        del sys.modules[name]
    for attr, opt in (("transport", "pld_transport"), ("checked", "pld_checked"), ("timeout_s", "--pld-timeout")):
        value = config.getoption(opt)
        if value is not None:
            setattr(OPTIONS, attr, value)
    daemons = config.getoption("pld_daemons")
    if daemons:
        OPTIONS.daemons = [d for d in daemons.split(",") if d]
    config.addinivalue_line("markers", "platforms(*ids): run only on these platform ids (met with --platform)")


# PyPTO's platform ids: its hardware and their simulators (pld runs every
# one as its simulator's profile).
PLATFORMS = ("a2a3", "a5", "a2a3sim", "a5sim")


def _platforms(config):
    tokens = [p.strip() for p in str(config.getoption("--platform")).split(",") if p.strip()]
    valid = [p for p in dict.fromkeys(tokens) if p in PLATFORMS]
    if tokens and not valid:
        raise pytest.UsageError(f"--platform must include one of {', '.join(PLATFORMS)}; got {tokens}")
    return valid


def pytest_collection_modifyitems(config, items):
    """``@pytest.mark.platforms(...)`` as PyPTO's conftest reads it: a test
    runs when its platforms meet ``--platform``'s (a variant parametrized
    by ``platform`` when its own is among them)."""
    cli = set(_platforms(config) or PLATFORMS)
    selected, deselected = [], []
    for item in items:
        marker = next(item.iter_markers(name="platforms"), None)
        allowed = cli & ({p for p in marker.args if p in PLATFORMS} if marker else set(PLATFORMS))
        callspec = getattr(item, "callspec", None)
        own = callspec.params.get("platform") if callspec else None
        (selected if (own in allowed if own is not None else allowed) else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
    if not config.getoption("--pld-run-codegen-tests"):
        for item in items:
            why = upstream_scope.reason(str(item.path), getattr(item, "originalname", item.name))
            if why is not None:
                item.add_marker(pytest.mark.skip(reason=f"out of scope on pld: {why}"))


@pytest.fixture(scope="session")
def device_ids(request):
    """Every ``--device`` id, in order: one pld rank each."""
    return parse_devices(request.config.getoption("--device"))


@pytest.fixture(scope="session")
def test_config(request):
    """A ``RunConfig`` from the command line, as PyPTO's conftest makes it."""
    from pypto.runtime import RunConfig  # noqa: PLC0415 - pld's, once configured

    platforms = _platforms(request.config)
    devices = parse_devices(request.config.getoption("--device"))
    return RunConfig(
        platform=platforms[0] if platforms else "a2a3sim",
        device_id=devices[0],
        codegen_only=request.config.getoption("--codegen-only"),
    )


@pytest.fixture(autouse=True)
def _codegen_only(request):
    """``--codegen-only``: there is no code generator here, so every test
    that would execute is skipped, saying so."""
    if request.config.getoption("--codegen-only"):
        pytest.skip("--codegen-only: pld runs programs; it generates no code")
