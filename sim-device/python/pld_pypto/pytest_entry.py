"""The ``pytest11`` entry point of pld-pypto: with ``PLD_PYPTO=1`` in the
environment, pytest loads :mod:`pld_pypto.pytest_plugin` by itself (and
only then, so that installing pld-pypto changes no other test suite).
``-p pld_pypto.pytest_plugin`` loads it either way, once."""

import os

if os.environ.get("PLD_PYPTO") == "1":
    pytest_plugins = ["pld_pypto.pytest_plugin"]
