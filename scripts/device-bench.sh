#!/usr/bin/env bash
# Kernel microbenchmarks and end-to-end decode throughput on a GPU machine that has a CUDA driver
# but no Rust toolchain. The binaries are built on a development machine and carried over.
#
#   scripts/device-bench.sh build   # on the development machine (needs cargo): builds both
#                                   # binaries in release mode and stages them, stripped, in
#                                   # target/device-bench/ (about 10 MB together)
#   scripts/device-bench.sh [run]   # on the GPU machine, from the repository root, with
#                                   # target/device-bench/ carried along
#
# `build` finds the bench binary the way anyone can: `cargo bench -p ingot-bench --no-run`
# prints "Executable benches/kernels.rs (target/release/deps/kernels-<hash>)".
#
# `run` prints, in order: the kernel benches (criterion output, then their summary table),
# the making of a synthetic DeepSeek-V2-Lite Q4_K_M model (~10.4 GB, in $BENCH_TMP), the
# decode bench on it (CUDA graph; the CPU backend at depth 0 if that fails), and last one
# summary of both. The steps share one time budget, so the whole run stays under 10 minutes. Environment:
#   BENCH_DIR  where the binaries are      (default target/device-bench)
#   BENCH_TMP  where the model is written  (default /tmp; needs 11 GB free)
#   OUT        where logs are copied       (optional)
set -euo pipefail

BENCH_DIR=${BENCH_DIR:-target/device-bench}
BENCH_TMP=${BENCH_TMP:-/tmp}
INGOT="$BENCH_DIR/ingot"
KERNELS="$BENCH_DIR/ingot-bench-kernels"
MODEL="$BENCH_TMP/ingot-v2-lite-q4_k_m.gguf"

build() {
    cargo build --release -p ingot
    local exe
    exe=$(cargo bench -p ingot-bench --no-run 2>&1 |
        sed -n 's/.*Executable benches\/kernels.rs (\(.*\)).*/\1/p' | tail -n 1)
    if [[ -z "$exe" || ! -x "$exe" ]]; then
        echo "device-bench: could not find the kernels bench binary in cargo's output" >&2
        exit 1
    fi
    mkdir -p "$BENCH_DIR"
    cp target/release/ingot "$INGOT"
    cp "$exe" "$KERNELS"
    strip "$INGOT" "$KERNELS" 2>/dev/null || true
    ls -l "$BENCH_DIR"
    echo "device-bench: carry $BENCH_DIR to the GPU machine and run: scripts/device-bench.sh run"
}

run() {
    for bin in "$INGOT" "$KERNELS"; do
        if [[ ! -x "$bin" ]]; then
            echo "device-bench: $bin is missing: run 'scripts/device-bench.sh build' first" >&2
            exit 1
        fi
    done
    local logs
    logs=$(mktemp -d)
    local start=$SECONDS
    # Every step's time limit comes out of one budget, so the run ends within 10 minutes.
    local deadline=$((SECONDS + 560))
    left() {
        local s=$((deadline - SECONDS))
        echo $((s > 1 ? s : 1))
    }

    echo "== kernel benches"
    # --bench: criterion's benchmark mode (without it criterion runs each bench once as a test).
    timeout "$(( $(left) < 200 ? $(left) : 200 ))" "$KERNELS" --bench 2>&1 | tee "$logs/kernels.txt" ||
        echo "device-bench: kernel benches failed or timed out"

    echo "== synthetic v2-lite q4_k_m model"
    if [[ ! -f "$MODEL" ]]; then
        timeout "$(( $(left) < 240 ? $(left) : 240 ))" \
            "$INGOT" synth --preset v2-lite --quant q4_k_m -o "$MODEL" 2>&1 | tail -n 3 ||
            echo "device-bench: synth failed or timed out"
    fi

    echo "== decode bench"
    if [[ -f "$MODEL" ]]; then
        if ! timeout "$(left)" "$INGOT" bench -m "$MODEL" --backend cuda --depths 0,1024,4096 -n 64 --reps 5 \
            >"$logs/decode.txt" 2>"$logs/decode.err"; then
            echo "device-bench: cuda decode bench failed: $(tail -n 1 "$logs/decode.err")"
            echo "device-bench: falling back to the CPU backend at depth 0"
            timeout "$(left)" "$INGOT" bench -m "$MODEL" --backend cpu --depths 0 -n 16 --reps 3 \
                >"$logs/decode.txt" 2>"$logs/decode.err" || echo "device-bench: cpu decode bench failed or timed out"
        fi
        cat "$logs/decode.err" "$logs/decode.txt"
    fi

    echo
    echo "================ summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $((SECONDS - start)) s) ================"
    # The kernel bench's witness and copy bandwidth, then its table (everything after "summary").
    grep -m 2 -E '^(gpu|no GPU|device-to-device)' "$logs/kernels.txt" || true
    sed -n '/^summary/,$p' "$logs/kernels.txt" || true
    [[ -f "$logs/decode.txt" ]] && cat "$logs/decode.txt"
    if [[ -n "${OUT:-}" ]]; then
        cp "$logs"/* "$OUT"/ 2>/dev/null || true
    fi
}

case "${1:-run}" in
build) build ;;
run) run ;;
*)
    echo "usage: $0 [build|run]" >&2
    exit 2
    ;;
esac
