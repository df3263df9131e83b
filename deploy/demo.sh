#!/usr/bin/env bash
# The two-node demo: builds pld-daemon and the ring-shift program as static
# binaries, builds the FROM-scratch image, starts rank 0 and rank 1 with
# docker-compose and runs the seed's ring shift against them through gRPC;
# it prints OK; then runs step 05 from Python through pld-pypto --daemons
# against the same two containers (when pld-pypto is installed).
#
#   deploy/demo.sh               the demo; the cluster is removed afterwards
#   deploy/demo.sh --kill-check  then also kills rank 1's container and
#                                checks that rank 0 reports the loss by name
#
# Works with docker-compose v1 and with `docker compose`.
set -euo pipefail
cd "$(dirname "$0")/.."

kill_check=false
for a in "$@"; do
    case "$a" in
        --kill-check) kill_check=true ;;
        *) echo "usage: deploy/demo.sh [--kill-check]" >&2; exit 2 ;;
    esac
done

if docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    compose=(docker-compose)
else
    echo "demo.sh: neither 'docker compose' nor docker-compose is installed" >&2
    exit 1
fi
compose+=(-f deploy/docker-compose.yml -p pld-demo)

echo "== building static binaries" >&2
triple=x86_64-unknown-linux-gnu
target="${CARGO_TARGET_DIR:-target}"
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target "$triple" \
    -p pld-daemon --bin pld-daemon -p pld-sim --example 05_remote_load_store >&2
ctx="$(mktemp -d)"
certs="$(mktemp -d)"
trap 'rm -rf "$ctx" "$certs"; "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true' EXIT
cp "$target/$triple/release/pld-daemon" "$ctx/pld-daemon"
cp "$target/$triple/release/examples/05_remote_load_store" "$ctx/pld-ring-shift"
for b in pld-daemon pld-ring-shift; do
    if ! ldd "$ctx/$b" 2>&1 | grep -qE "statically linked|not a dynamic executable"; then
        echo "demo.sh: $b is not statically linked: $(ldd "$ctx/$b" 2>&1 | head -3)" >&2
        exit 1
    fi
done

echo "== a throwaway cluster CA and one certificate per rank (mutual TLS)" >&2
"$ctx/pld-daemon" certs --ranks 2 --out "$certs" --cluster-id pld-demo >&2
chmod 0755 "$certs"
export PLD_CERTS_DIR="$certs"

echo "== building the image (FROM scratch)" >&2
docker build -q -t pld:demo -f deploy/Dockerfile "$ctx" >&2

echo "== starting rank 0 and rank 1" >&2
"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
"${compose[@]}" up -d rank0 rank1 >&2

echo "== the ring shift through gRPC" >&2
if ! "${compose[@]}" run --rm demo; then
    "${compose[@]}" logs rank0 rank1 >&2
    exit 1
fi

echo "== step 05 from Python through pld-pypto --daemons" >&2
# pld-pypto runs on the host, inside rank 0's network namespace (the demo
# network is internal: nothing is published), against both containers'
# gRPC ports; scripts/test installs it into the venv.
pypto="${PLD_VENV:-$target/venv}/bin/pld-pypto"
if [ -x "$pypto" ] && command -v nsenter >/dev/null; then
    ip_of() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$("${compose[@]}" ps -q "$1")"; }
    pid0=$(docker inspect -f '{{.State.Pid}}' "$("${compose[@]}" ps -q rank0)")
    if ! PLD_CLIENT_TOKEN=pld-demo-token nsenter -t "$pid0" -n "$pypto" \
        --daemons "$(ip_of rank0):50051,$(ip_of rank1):50051" \
        sim-device/python/examples/05_remote_load_store.py -p a2a3sim -d 0,1 --mode store; then
        "${compose[@]}" logs rank0 rank1 >&2
        exit 1
    fi
elif [ "${CI:-}" = true ]; then
    echo "CI: pld-pypto ($pypto) and nsenter are needed for the pld-pypto step" >&2
    exit 1
else
    echo "skipping the pld-pypto step: install it first (pip install ./sim-device/python into $pypto's venv)" >&2
fi

if $kill_check; then
    echo "== killing rank 1; rank 0 must report the loss" >&2
    "${compose[@]}" kill rank1 >&2
    # Rank 0 notices at the QUIC idle timeout (the op timeout, 10 s);
    # look at its log once a second for up to 60 s.
    cid=$("${compose[@]}" ps -q rank0)
    line=""
    for _ in $(seq 60); do
        line=$(docker logs "$cid" 2>&1 | grep -m1 -E "rank 1 is unreachable" || true)
        [ -n "$line" ] && break
        sleep 1
    done
    if [ -z "$line" ]; then
        echo "demo.sh: rank 0 did not report the loss of rank 1 within 60 s" >&2
        docker logs "$cid" >&2
        exit 1
    fi
    echo "rank 0 reported: $(printf '%s' "$line" | sed 's/\x1b\[[0-9;]*m//g')"
fi

