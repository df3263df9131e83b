"""Our own program set, run as a user runs it: ``pld-pypto program.py``
must print the program's own OK at P = 2, the any-P ones also at P = 3 and
4, in every mode, in-process (QUIC and TCP) and against real daemons."""

import pytest

from conftest import EXAMPLES, run

# (program, modes, any P?)
PROGRAMS = [
    ("05_remote_load_store.py", ["load", "store"], True),
]


def cases():
    for name, modes, any_p in PROGRAMS:
        for p in ([2, 3, 4] if any_p else [2]):
            for mode in modes or [None]:
                yield name, mode, p


@pytest.mark.parametrize("name,mode,p", list(cases()))
def test_program_prints_ok_in_process(name, mode, p):
    args = ["-p", "a2a3sim", "-d", ",".join(str(i) for i in range(p))]
    if mode:
        args += ["--mode", mode]
    transport = ["--transport", "tcp"] if p == 3 else []
    out = run(EXAMPLES / name, *transport, *args)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr


@pytest.mark.parametrize("name,modes,_any_p", PROGRAMS)
def test_program_prints_ok_against_daemons(daemons, name, modes, _any_p):
    for mode in modes or [None]:
        extra = ["--mode", mode] if mode else []
        out = run(EXAMPLES / name, "--daemons", daemons, "-p", "a2a3sim", "-d", "0,1", *extra)
        assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr


def test_compile_only_prints_the_output_dir_and_runs_nothing():
    out = run(EXAMPLES / "05_remote_load_store.py", "-d", "0,1", "--compile-only")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("compile_only done: ") and "OK" not in out.stdout
