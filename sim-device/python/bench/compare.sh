#!/usr/bin/env bash
# The device's ops from Rust and through pld-pypto, in one run, alternated
# (Rust, Python, Rust, Python, ...) so that drift hits both alike; prints
# each figure and the ratio Python / Rust (latency) and Python / Rust
# (bandwidth). Both use the workspace's dev profile (what pip builds the
# extension with), QUIC, two embedded ranks.
#
#   sim-device/python/bench/compare.sh [ROUNDS] [--transport tcp]
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds="${1:-3}"; shift || true
target="${CARGO_TARGET_DIR:-target}"
venv="${PLD_VENV:-$target/venv}"
cargo build -q -p pld-sim --example device_bench
[ -x "$venv/bin/pld-pypto" ] || { echo "install pld-pypto first: $venv/bin/pip install ./sim-device/python" >&2; exit 1; }
rust="$(mktemp)"; py="$(mktemp)"
trap 'rm -f "$rust" "$py"' EXIT
for _ in $(seq "$rounds"); do
    "$target/debug/examples/device_bench" -d 0,1 "$@" | grep -v '^OK$' >> "$rust"
    "$venv/bin/pld-pypto" "$@" sim-device/python/bench/device_bench.py -d 0,1 >> "$py"
done
python3 - "$rust" "$py" <<'PY'
import sys
from statistics import median

def load(path):
    rows = {}
    for line in open(path):
        f = line.split()
        rows.setdefault(f"{f[0]} {f[1]}", []).append(float(f[2]))
    return {k: median(v) for k, v in rows.items()}

rust, py = load(sys.argv[1]), load(sys.argv[2])
print(f"{'op':<20}{'Rust us':>10}{'pld-pypto us':>14}{'ratio':>8}")
for k in rust:
    print(f"{k:<20}{rust[k]:>10.1f}{py[k]:>14.1f}{py[k] / rust[k]:>7.2f}x")
PY
