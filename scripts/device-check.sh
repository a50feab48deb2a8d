#!/usr/bin/env bash
# GPU checks of the decode graph, for a machine with an NVIDIA GPU (CUDA 13 driver, Python) but
# no Rust toolchain. Two steps:
#
#   scripts/device-check.sh prepare   # here, with Rust: release binaries into dist/ (stripped)
#   scripts/device-check.sh           # on the GPU machine, in the repository root (< 10 min)
#
# The run: a witness line (card, driver, clocks), every kernel test binary (their GPU halves run
# when a GPU is present), the CUDA gate on tiny models of both layouts (test binary cuda_gate:
# the captured graph against the CPU oracle), then lite-4l synthesized on the spot and its decode
# tok/s at cache depths 0, 1024 and 4096. Exits non-zero on the first failing step.
set -euo pipefail
cd "$(dirname "$0")/.."
DIST=dist

prepare() {
    rm -rf "$DIST" && mkdir -p "$DIST/tests"
    cargo build --release --bin ingot
    cp target/release/ingot "$DIST/"
    # Test binaries of the kernel and gate crates, located through cargo's JSON messages.
    for pkg in ingot-kernels ingot-gates; do
        cargo test --release --no-run -p "$pkg" --message-format=json | PKG="$pkg" DIST="$DIST" python3 -c '
import json, os, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    # Of the gate crate only the GPU gate is needed (the sim gates run in CI).
    if os.environ["PKG"] == "ingot-gates" and m["target"]["name"] != "cuda_gate":
        continue
    dest = os.environ["DIST"] + "/tests/" + os.environ["PKG"] + "-" + m["target"]["name"]
    shutil.copy(m["executable"], dest)
'
    done
    if command -v strip >/dev/null; then strip "$DIST/ingot" "$DIST"/tests/*; fi
    du -sh "$DIST"
}

step() { echo; echo "=== $* ($(date +%T))"; }

run() {
    [ -x "$DIST/ingot" ] || { echo "no $DIST/ingot: run '$0 prepare' on a machine with Rust first" >&2; exit 2; }
    step "witness"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu \
        --format=csv,noheader | sed 's/^/gpu: /'
    nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.width.current --format=csv,noheader | sed 's/^/pcie: /'

    step "kernel tests on the GPU"
    for t in "$DIST"/tests/ingot-kernels-*; do
        echo "--- $(basename "$t")"
        timeout 240 "$t" --test-threads 1
    done

    step "ingot gate --backend cuda on tiny models (mla + legacy, q4_k_m + q3_k_m)"
    for t in "$DIST"/tests/ingot-gates-cuda_gate; do
        timeout 240 "$t" --nocapture --test-threads 1
    done

    step "lite-4l decode speed"
    local model=/tmp/ingot-lite-4l-q4_k_m.gguf
    [ -f "$model" ] || "$DIST/ingot" synth --preset lite-4l --quant q4_k_m -o "$model"
    if "$DIST/ingot" bench -m "$model" --backend cuda --depths 0 -n 1 --reps 1 >/dev/null 2>&1; then
        timeout 300 "$DIST/ingot" bench -m "$model" --backend cuda --depths 0,1024,4096 -n 64 --reps 3
    else
        # No CUDA arm in `ingot bench` yet: `ingot run -v` prefills a prompt of the wanted depth
        # (one graph replay per prompt token) and prints its decode tok/s.
        for depth in 0 1024 4096; do
            local prompt
            prompt=$(python3 -c "import sys; print(('the quick brown fox ' * 4096)[:max(1, 4 * $depth)])")
            echo "--- depth ~$depth"
            timeout 200 "$DIST/ingot" run -m "$model" --backend cuda --temp 0 -n 64 --ctx $((depth * 2 + 256)) \
                -p "$prompt" -v 2>&1 >/dev/null | grep -E 'cuda:|prompt tokens' || true
        done
    fi
}

case "${1:-run}" in
    prepare) prepare ;;
    run) run ;;
    *) echo "usage: $0 [prepare|run]" >&2; exit 2 ;;
esac
