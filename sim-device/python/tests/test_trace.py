"""``pld-pypto --trace FILE``: the embedded ranks' timeline, as a viewer
reads it (JSON): a track per rank, every remote op's flow from its issue on
the origin to its application on the target, after it started, and each
rank's barrier with its rounds inside it."""

import json

import pytest

from conftest import EXAMPLES, run


@pytest.mark.parametrize("mode", ["load", "store"])
def test_a_traced_step05_shows_op_flows_ending_on_their_targets_and_the_barrier_rounds(tmp_path, mode):
    trace = tmp_path / "trace.json"
    out = run(EXAMPLES / "05_remote_load_store.py", "--trace", str(trace),
              "-p", "a2a3sim", "-d", "0,1,2,3", "--mode", mode)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout + out.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert tracks == {0, 1, 2, 3}
    starts = {e["id"]: e for e in events if e["ph"] == "s" and e.get("cat") == "op"}
    ends = [e for e in events if e["ph"] == "f" and e.get("cat") == "op"]
    assert len(starts) >= 4 and len(ends) == len(starts)
    for f in ends:
        s = starts[f["id"]]
        assert f["pid"] == s["args"]["to"] != s["pid"], (s, f)
        assert f["ts"] >= s["ts"], (s, f)
    for r in range(4):
        barrier = [e for e in events if e["pid"] == r and e.get("cat") == "barrier"
                   and e["name"].startswith("barrier of 4 ranks")]
        assert len(barrier) == 1, r
        b0, b1 = barrier[0]["ts"], barrier[0]["ts"] + barrier[0]["dur"]
        for k, d in ((1, 1), (2, 2)):
            name = f"barrier round {k}: credit to {(r + d) % 4}, from {(r - d) % 4}"
            rounds = [e for e in events if e["pid"] == r and e["name"] == name]
            assert len(rounds) == 1, (r, name)
            assert b0 <= rounds[0]["ts"] and rounds[0]["ts"] + rounds[0]["dur"] <= b1 + 0.01, (r, name)


def test_trace_with_daemons_is_refused_naming_the_daemons_flag(tmp_path):
    out = run(EXAMPLES / "05_remote_load_store.py", "--trace", str(tmp_path / "t.json"),
              "--daemons", "127.0.0.1:1,127.0.0.1:2", "-p", "a2a3sim", "-d", "0,1")
    assert out.returncode != 0
    assert "for --daemons, start every daemon with --trace FILE" in out.stderr


def test_a_trace_path_that_cannot_be_written_is_refused_before_the_program_runs(tmp_path):
    out = run(EXAMPLES / "05_remote_load_store.py", "--trace", "/nonexistent-pld-dir/t.json",
              "-p", "a2a3sim", "-d", "0,1")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--trace /nonexistent-pld-dir/t.json: cannot write there" in out.stderr, out.stderr
    assert "OK" not in out.stdout, "the program ran"
