#!/usr/bin/env bash
# The GPU check of ingot: correctness first, then speed, on a machine with an NVIDIA GPU (CUDA 13
# driver, Python 3) and no Rust toolchain.
#
#   scripts/device-check.sh prepare     # here, with Rust: builds only the binaries that touch
#                                       # the GPU (release, stripped, the sm_90a cubin embedded:
#                                       # INGOT_CUBIN_ARCHS) into one xz archive,
#                                       # dist/device-bundle.tar.xz; prints its size and fails
#                                       # when it and the working tree exceed 44 MiB
#   scripts/device-check.sh [run]       # on the GPU machine, in the repository root, with
#                                       # dist/device-bundle.tar.xz carried along
#   scripts/device-check.sh --rehearse  # the whole path (dev-profile bundle, unpack, every step)
#                                       # on a machine without a GPU: must exit 3 saying
#                                       # "no GPU found"; `cargo xtask test` (CI) runs it
#
# Steps, most valuable first, each run even when an earlier one failed, all within one 5-minute
# deadline (steps it leaves out are "not run: deadline reached" in the summary):
#   smoke          open GPU 0, load the kernels (the embedded cubin; it fails if a cubin for the
#                  card is embedded and not used), one kernel on the GPU vs ptx-sim bit for bit
#                  (fails fast: 60 s)
#   model          `ingot synth` lite-4l q4_k_m (a tiny model instead when smoke found no GPU)
#   gate           the captured CUDA graph vs the oracle (tiny models) and vs the CPU backend
#                  (lite-4l, 16 heads: the flash_latent_mma path); the batched prefill's chunk
#                  graphs vs the CPU chunked prefill (tiny16_prefill_chunks_cuda_vs_cpu); the
#                  NextN/MTP block vs the oracle and greedy with drafts vs without
#                  (cuda_mtp_drafts_change_no_token: the trained model, tiny-glm); the verify
#                  graph vs decode steps bit for bit (lite4l_verify_graph_equals_decode_steps)
#   gate_q8_0      `ingot gate --backend cuda --cache-type q8_0`: the q8_0 latent cache's plan vs
#                  the CPU backend with a q8_0 cache
#   kernels:<test> every kernel test with a GPU half, GPU halves only, sim-vs-GPU comparisons;
#                  those changed since the last GPU run first (the bundle's ORDER)
#   decode         `ingot bench --backend cuda` on lite-4l at depths 0, 1024, 4096
#   decode_q8_0    the same with `--cache-type q8_0` at depths 0 and 4096
#   bench          the kernel benches (CUDA events on the kernels' stream, copy-bandwidth sanity)
#   jit            the smoke test again with INGOT_NO_CUBIN=1: the PTX through the driver's JIT,
#                  the path of every card without a cubin (its JIT time)
#   peer           llama.cpp's llama-bench from dist/peer-bundle.tar.xz (`cargo xtask peer`),
#                  when carried: it loads and sees the GPU (scripts/device-peer.sh probe; without
#                  a driver it loads against the bundle's stand-in libcuda and finds no GPU).
#                  Not carried: "skip", saying how to build it (scripts/device-bench.sh peer
#                  runs the comparison itself)
# then a summary table of every step's exit status and key figure. INGOT_REQUIRE_GPU=1 is set, so
# no GPU half can be skipped silently; CUDA_CACHE_PATH points at a fresh writable folder, so the
# jit step's time is a real compile.
#
# Exit status: 0 every step passed; 3 every failing step failed because no GPU was found; 1 any
# other failure; 2 usage or a missing bundle. With $OUT set, the full log (device-check.log),
# every step's log (logs/), the JIT info log and the JSON summary (device-check.json) go there.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=scripts/device-lib.sh
. scripts/device-lib.sh

DIST=dist
PEER_BUNDLE=$DIST/peer-bundle.tar.xz

prepare() {
    local dir=$1 profile=$2 level=$3
    mkdir -p "$dir" || return 1
    build_bundle "$dir" "$profile" "$level" || return 1
    local bytes
    bytes=$(stat -c %s "$dir/device-bundle.tar.xz")
    printf 'bundle: %s, %d bytes (%.1f MiB, %s profile)\n' "$dir/device-bundle.tar.xz" "$bytes" \
        "$(echo "$bytes" | awk '{print $1 / 1048576}')" "$profile"
    if [[ $profile == release ]]; then
        check_carry "$bytes" "bundle" || return 1
        echo "carry $dir/device-bundle.tar.xz to the GPU machine and run: scripts/device-check.sh"
    else
        # A dev bundle is not what travels: the tree is held to the limit with the release
        # bundle's reserve in its place.
        check_carry $((BUNDLE_RESERVE_MIB * 1048576)) "release bundle reserve" || return 1
    fi
}

run() {
    local bundle=$1
    if [[ ! -f $bundle ]]; then
        echo "device-check: no $bundle: run 'scripts/device-check.sh prepare' on a machine with Rust and carry it" >&2
        exit 2
    fi
    local work
    work=$(mktemp -d "${TMPDIR:-/tmp}/ingot-device-check.XXXXXX") || exit 2
    # A rehearsal's unpacked bundle and logs (hundreds of MiB) go when it ends; a real run keeps
    # them for whoever reads its logs.
    [[ ${REHEARSAL:-0} == 1 ]] && trap "rm -rf '$work'" EXIT
    local out=${OUT:-$work/out}
    mkdir -p "$out/logs" || exit 2
    LOGS=$out/logs
    RESULTS=$work/results.tsv
    : >"$RESULTS"
    DEADLINE=$((SECONDS + RUN_DEADLINE_S))
    # Everything printed also goes to the full log.
    exec > >(tee -a "$out/device-check.log") 2>&1

    echo "device-check $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    witness
    unpack_bundle "$bundle" "$work/bundle" || { echo "device-check: cannot unpack $bundle"; exit 2; }
    echo "bundle built from commit $(cat "$work/bundle/COMMIT" 2>/dev/null || echo '?')"
    sed 's/^/bundle: /' "$work/bundle/MANIFEST"
    local bin=$work/bundle/bin tests=$work/bundle/tests

    export INGOT_REQUIRE_GPU=1 INGOT_GPU_ONLY=1 RUST_BACKTRACE=1
    # The test binaries were built elsewhere: the golden models (the trained model and tiny-glm
    # of the gate's drafting case) are the carried tree's.
    export INGOT_GOLDEN_DIR=$PWD/testdata/golden
    export CUDA_CACHE_PATH=$work/cuda-cache INGOT_JIT_LOG=$out/jit-info.log
    mkdir -p "$CUDA_CACHE_PATH"

    run_step smoke 60 fig_smoke "$tests/ingot-kernels-smoke" --test-threads 1 --nocapture

    local model=$work/lite-4l-q4_k_m.gguf
    if grep -q 'no GPU found' "$LOGS/smoke.log"; then
        # No GPU: the later steps fail at once; a tiny model keeps the rehearsal quick.
        model=$work/tiny-q4_k_m.gguf
        run_step model 60 fig_none "$bin/ingot" synth --preset tiny --quant q4_k_m -o "$model"
    else
        run_step model 120 fig_none "$bin/ingot" synth --preset lite-4l --quant q4_k_m -o "$model"
        export INGOT_LITE4L_GGUF=$model
    fi

    run_step gate 150 fig_gate "$tests/ingot-gates-cuda_gate" --test-threads 1 --nocapture
    # The q8_0 latent cache end to end: the CUDA plan with a q8_0 cache vs the CPU backend with one.
    run_step gate_q8_0 90 fig_gate "$bin/ingot" gate -m "$model" --backend cuda --cache-type q8_0 -n 8

    local t
    while read -r t; do
        [[ $t == smoke || -z $t ]] && continue
        run_step "kernels:$t" 60 fig_tests "$tests/ingot-kernels-$t" --test-threads 4
    done < <(cat "$work/bundle/ORDER" 2>/dev/null || (cd "$tests" && ls ingot-kernels-* | sed 's/^ingot-kernels-//'))

    run_step decode 120 fig_decode "$bin/ingot" bench -m "$model" --backend cuda \
        --depths 0,1024,4096 -n 64 --reps 3
    run_step decode_q8_0 90 fig_decode "$bin/ingot" bench -m "$model" --backend cuda \
        --cache-type q8_0 --depths 0,4096 -n 64 --reps 3

    run_step bench 200 fig_bench "$bin/ingot-bench-kernels" --bench
    INGOT_NO_CUBIN=1 run_step jit 120 fig_smoke "$tests/ingot-kernels-smoke" --test-threads 1 --nocapture

    if [[ ! -f $PEER_BUNDLE ]]; then
        echo "=== peer: not run: no $PEER_BUNDLE; build it with 'cargo xtask peer' (more than an hour on 2 shared cores the first time; not part of cargo xtask test) and carry it"
        record peer skip 0 "not run: no $PEER_BUNDLE (cargo xtask peer builds it)"
    elif unpack_bundle "$PEER_BUNDLE" "$work/peer"; then
        run_step peer 60 fig_peer scripts/device-peer.sh probe "$work/peer"
    else
        record peer 1 0 "cannot unpack $PEER_BUNDLE"
    fi

    # The verdict is the last line (CI's rehearsal judges it), so the paths come first.
    echo "full log: $out/device-check.log; step logs: $LOGS; JSON: $out/device-check.json"
    summarize device-check "$out/device-check.json"
    exit $?
}

case "${1:-run}" in
prepare) prepare "$DIST" release 9 || exit 1 ;;
run) run "$DIST/device-bundle.tar.xz" ;;
--rehearse)
    # A dev-profile bundle (the test binaries CI has already built; fast xz preset), the working
    # tree held to the carry limit with the release bundle's reserve, then the real run path.
    prepare "$DIST/rehearse" dev 0 || { echo "device-check --rehearse: prepare failed" >&2; exit 1; }
    REHEARSAL=1 run "$DIST/rehearse/device-bundle.tar.xz"
    ;;
*)
    echo "usage: $0 [prepare|run|--rehearse]" >&2
    exit 2
    ;;
esac
