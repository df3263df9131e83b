"""``--checked`` on our own tutorial programs with one ordering call
removed: each ``pld.system.wait`` and ``pld.tensor.barrier`` of every
program, in turn. Where the call ordered an access, the program now races,
and the report must come in every run — happens-before is a property of
the program, not of timing (docs/checked.md). Where nothing of the
program follows the call (a closing barrier, the ring's last handshake)
or the program orders the same accesses another way, every run must stay
clean and print OK. A program that raced in some runs only, or a removal
this table does not know, fails the test."""

import re

import pytest

from conftest import EXAMPLES, run
from test_programs import PROGRAMS

CALL = re.compile(r"^(\s*)(?:(\w+)\s*=\s*)?pld\.(system\.wait|tensor\.barrier)\((\w+)")

RUNS = 3

# (program, n-th ordering call of the file, from 1) -> the modes whose
# runs must report a race once it is removed, and the rank count (the ring
# needs its P to divide its size; at P = 2 its allgather's wait is also
# ordered by the reduce-scatter's last one). Every other mode of the
# program must stay clean.
RACES = {
    ("04_barrier.py", 1): [""],
    ("04_barrier.py", 2): ["--use-builtin"],
    ("04_barrier.py", 3): [],  # the closing barrier: nothing follows it
    ("05_remote_load_store.py", 1): ["load"],
    ("05_remote_load_store.py", 2): ["store"],
    ("06_put_get.py", 1): ["put"],
    ("06_put_get.py", 2): ["get"],
    ("07_put_get_any_p.py", 1): ["get"],
    ("07_put_get_any_p.py", 2): ["put"],
    ("07_put_get_any_p.py", 3): [],  # the closing barrier
    ("08_allreduce_mesh.py", 1): [None],
    ("09_allreduce_two_phase.py", 1): [None],
    ("10_allreduce_ring.py", 1): [None],
    # The reduce-scatter-done handshake: the ring's own chain of notifies
    # already orders every rank's last read of its right neighbour's
    # scratch before that neighbour writes it again.
    ("10_allreduce_ring.py", 2): [],
    ("10_allreduce_ring.py", 3): [None],
    ("10_allreduce_ring.py", 4): [],  # the closing handshake
    ("12_broadcast.py", 1): ["hand"],
    ("13_allgather.py", 1): ["hand"],
    ("14_reduce_scatter.py", 1): ["hand"],
    ("15_all_to_all.py", 1): ["hand"],
    ("all_to_all_combine.py", 1): ["fp32", "fp16"],
    ("push_scaled.py", 1): [None],
}

RANKS = {"10_allreduce_ring.py": 4}


def removals():
    """Every ordering call of every program: (program, its number, line)."""
    for name, _ in PROGRAMS:
        lines = (EXAMPLES / name).read_text().split("\n")
        k = 0
        for i, line in enumerate(lines):
            if CALL.match(line):
                k += 1
                yield name, k, i


def without(name, i, tmp_path):
    """Program `name` with the ordering call on line `i` removed: a bare
    call becomes `pass`; `signal = pld.tensor.barrier(signal)` becomes
    `signal = signal`."""
    lines = (EXAMPLES / name).read_text().split("\n")
    indent, target, _, arg = CALL.match(lines[i]).groups()
    lines[i] = f"{indent}{target} = {arg}" if target else f"{indent}pass"
    f = tmp_path / f"{name[:-3]}_without_line_{i + 1}.py"
    f.write_text("\n".join(lines))
    return f


def mode_flags(mode):
    if not mode:
        return []
    return [mode] if mode.startswith("--") else ["--mode", mode]


def test_the_table_knows_every_ordering_call_of_every_program():
    assert {(n, k) for n, k, _ in removals()} == set(RACES)


@pytest.mark.parametrize("name,k,line", list(removals()))
def test_removing_an_ordering_call_races_in_every_run_or_in_none(tmp_path, name, k, line):
    program = without(name, line, tmp_path)
    modes = dict(PROGRAMS)[name] or [None]
    racing = RACES[(name, k)]
    p = RANKS.get(name, 2)
    for mode in modes:
        args = ["-p", "a2a3sim", "-d", ",".join(str(i) for i in range(p)), *mode_flags(mode)]
        for attempt in range(RUNS):
            out = run(program, "--checked", "--transport", "tcp", *args, timeout=120)
            text = out.stdout + out.stderr
            where = f"{name} without line {line + 1}, mode {mode!r}, run {attempt + 1}"
            if mode in racing:
                assert out.returncode == 1, f"{where}: {text}"
                assert "race(s) — the result depends on timing" in text, f"{where}: {text}"
                assert "race on rank" in text and "are unordered" in text, f"{where}: {text}"
            else:
                assert out.returncode == 0 and out.stdout.strip().endswith("OK"), f"{where}: {text}"
