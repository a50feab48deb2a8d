#!/usr/bin/env bash
# Kernel microbenchmarks and end-to-end decode throughput on a GPU machine with a CUDA driver
# and Python 3 but no Rust toolchain. Uses the bundle of scripts/device-check.sh.
#
#   scripts/device-check.sh prepare   # here, with Rust: dist/device-bundle.tar.xz (<= 44 MiB)
#   scripts/device-bench.sh [run]     # on the GPU machine, in the repository root, with the
#                                     # bundle carried along
#   scripts/device-bench.sh decode    # model, decode and nodes only (device-check has run the
#                                     # kernel benches in the same lease)
#   scripts/device-bench.sh nodes     # model and nodes only (the per-node times)
#   scripts/device-bench.sh peer      # ingot vs llama.cpp on the same card and file: needs
#                                     # dist/peer-bundle.tar.xz (`cargo xtask peer`) carried too
#
# Steps, each run even when an earlier one failed, within one 8.5-minute deadline:
#   bench   the kernel benches: CUDA events on the kernels' own stream, a device-to-device copy
#           measured in the same run; a cold case above that copy bandwidth marks the bench
#           invalid (exit 2 of the bench binary)
#   model   a synthetic DeepSeek-V2-Lite q4_k_m (~10.4 GB, in $BENCH_TMP, default /tmp)
#   decode  `ingot bench --backend cuda` on it at depths 0, 1024, 4096
#   decode_no_pdl
#           the same at depths 0 and 4096 with INGOT_NO_PDL=1: on sm_90 and later every node
#           then starts after its predecessor has finished (decode has them start early,
#           programmatic dependent launch), so the two rows measure what early launch gains:
#           the earlier start and the weight prefetch before each kernel's wait together (with
#           INGOT_NO_PDL the prefetches still run, just before their own loads)
#   decode_no_l2_streaming
#           depth 0 with INGOT_NO_L2_STREAMING=1: no launch gets its L2 streaming window (the
#           merge's attn_output read evict-first so the FFN rows the flash handed ahead stay in
#           L2); against the decode row's depth 0 it measures that window (the decode rows run
#           with it). On an H200's 50 MB L2 little is expected: the 6 MB of a 3090 is the case
#   nodes-d0, nodes-d4096
#           `ingot plan --measure --predict h200` on it: every node of one decode step timed
#           between CUDA events (median of 20 reps) beside its predicted time, the graph replay
#           and the eager step of the same run, and measured/predicted per kernel; the full
#           table is in the step's log
#   draft   `ingot bench --backend cuda --draft mtp --draft-max K` (K = 1, 3) on the trained model
#           (testdata/golden, unpacked with Python's lzma): greedy with and without the NextN/MTP
#           block's drafts, acceptance, tokens per step, the speed-up (the verify is a decode step
#           per position: a small model's launch-bound steps, not a V2-Lite figure)
# peer mode instead (deadline 9 minutes; INGOT_DEVICE_DEADLINE_S sets another):
#   peer-load    llama-bench from the peer bundle loads and sees the GPU (scripts/device-peer.sh)
#   model        as above
#   llama.cpp-rN, ingot-rN (N = 1, 2, 3, alternating)
#           llama-bench -fa 1 -ngl 99 -n 64 -p 0 -d 0,4096,16384 -ub 16 -r 3 -o json, then
#           `ingot bench --backend cuda --depths 0,4096,16384 -p 512 -n 64 --reps 3 --json`. The
#           bundle has no cuBLAS (a stand-in aborts if called), and ggml multiplies the F32 router
#           weights of a batch over 16 tokens with cuBLAS, so llama.cpp fills the depth in
#           16-token micro-batches (-ub 16: its mmf/MMQ kernels); decode is one token either way
#   llama.cpp-pp512
#           llama-bench -p 512 at the default micro-batch: measured if it does not call cuBLAS,
#           else "needs cuBLAS" (the stand-in's abort names the function), not a failure
#   then scripts/peer-table.py: per test the median of the rounds for both engines and the ratio
#   (ingot / llama.cpp); the table and device-bench-peer.json go to $OUT/peer too.
# then a summary table. With $OUT set: full log, step logs and device-bench.json go there.
# INGOT_REQUIRE_GPU=1 is set: without a GPU every step fails saying "no GPU found" (exit 3).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=scripts/device-lib.sh
. scripts/device-lib.sh

BUNDLE=dist/device-bundle.tar.xz
PEER_BUNDLE=dist/peer-bundle.tar.xz
BENCH_TMP=${BENCH_TMP:-/tmp}

mode=${1:-run}
if [[ $mode != run && $mode != decode && $mode != nodes && $mode != peer ]]; then
    echo "usage: $0 [run|decode|nodes|peer]   (build the bundle with: scripts/device-check.sh prepare)" >&2
    exit 2
fi
if [[ ! -f $BUNDLE ]]; then
    echo "device-bench: no $BUNDLE: run 'scripts/device-check.sh prepare' on a machine with Rust and carry it" >&2
    exit 2
fi
if [[ $mode == peer && ! -f $PEER_BUNDLE ]]; then
    echo "device-bench: no $PEER_BUNDLE: run 'cargo xtask peer' on a machine with Rust and carry it with $BUNDLE" >&2
    exit 2
fi
# The peer comparison's rounds need more than the 5-minute default.
[[ $mode == peer ]] && RUN_DEADLINE_S=${INGOT_DEVICE_DEADLINE_S:-540}
work=$(mktemp -d "${TMPDIR:-/tmp}/ingot-device-bench.XXXXXX") || exit 2
out=${OUT:-$work/out}
mkdir -p "$out/logs" || exit 2
LOGS=$out/logs
RESULTS=$work/results.tsv
: >"$RESULTS"
DEADLINE=$((SECONDS + RUN_DEADLINE_S))
exec > >(tee -a "$out/device-bench.log") 2>&1

echo "device-bench $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
witness
unpack_bundle "$BUNDLE" "$work/bundle" || { echo "device-bench: cannot unpack $BUNDLE"; exit 2; }
echo "bundle built from commit $(cat "$work/bundle/COMMIT" 2>/dev/null || echo '?')"
export INGOT_REQUIRE_GPU=1 CUDA_CACHE_PATH=$work/cuda-cache
mkdir -p "$CUDA_CACHE_PATH"
bin=$work/bundle/bin
model=$BENCH_TMP/ingot-v2-lite-q4_k_m.gguf

[[ $mode == run ]] && run_step bench 200 fig_bench "$bin/ingot-bench-kernels" --bench
if [[ $mode == peer ]]; then
    peer=$work/peer
    unpack_bundle "$PEER_BUNDLE" "$peer" || { echo "device-bench: cannot unpack $PEER_BUNDLE"; exit 2; }
    run_step peer-load 60 fig_peer scripts/device-peer.sh probe "$peer"
    if ! grep -q '^peer: llama-bench loads and sees' "$LOGS/peer-load.log"; then
        # Without the GPU llama-bench would run the 27-layer model on the CPU.
        summarize device-bench "$out/device-bench.json"
        exit $?
    fi
fi
if [[ -f $model ]]; then
    record model 0 0 "reused $model"
else
    run_step model 240 fig_none "$bin/ingot" synth --preset v2-lite --quant q4_k_m -o "$model"
fi
if [[ $mode == peer ]]; then
    pdir=$out/peer
    mkdir -p "$pdir"
    # Same depths, same decode length, 3 repetitions a call; the engines alternate so drift
    # between rounds touches both.
    for r in 1 2 3; do
        run_step "llama.cpp-r$r" 150 fig_peer scripts/device-peer.sh json "$pdir/llama.cpp-r$r.json" \
            "$peer/bin/llama-bench" -m "$model" -fa 1 -ngl 99 -n 64 -p 0 -d 0,4096,16384 -ub 16 -r 3 -o json
        run_step "ingot-r$r" 200 fig_peer scripts/device-peer.sh json "$pdir/ingot-r$r.json" \
            "$bin/ingot" bench -m "$model" --backend cuda --depths 0,4096,16384 -p 512 -n 64 --reps 3 --json
    done
    run_step llama.cpp-pp512 90 fig_peer scripts/device-peer.sh pp "$pdir/llama.cpp-pp512.json" \
        "$peer/bin/llama-bench" -m "$model" -fa 1 -ngl 99 -n 0 -p 512 -d 0 -r 3 -o json
    echo
    echo "==== ingot vs llama.cpp ($(head -n 1 "$peer/BUILD"))"
    python3 scripts/peer-table.py "$pdir" "$pdir/device-bench-peer.json" | tee "$pdir/table.md"
elif [[ $mode != nodes ]]; then
    run_step decode 300 fig_decode "$bin/ingot" bench -m "$model" --backend cuda \
        --depths 0,1024,4096 -n 64 --reps 5
    INGOT_NO_PDL=1 run_step decode_no_pdl 150 fig_decode "$bin/ingot" bench -m "$model" \
        --backend cuda --depths 0,4096 -n 64 --reps 5
    INGOT_NO_L2_STREAMING=1 run_step decode_no_l2_streaming 90 fig_decode "$bin/ingot" bench \
        -m "$model" --backend cuda --depths 0 -n 64 --reps 3
fi
[[ $mode == peer ]] || for depth in 0 4096; do
    run_step "nodes-d$depth" 150 fig_nodes "$bin/ingot" plan -m "$model" --backend cuda --measure \
        --reps 20 --depth "$depth" --predict h200
done
if [[ $mode == run || $mode == decode ]]; then
    trained=$work/trained-rust-std.gguf
    if python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
        testdata/golden/trained-rust-std/model.gguf.xz "$trained"; then
        for k in 1 3; do
            run_step "draft-k$k" 60 fig_draft "$bin/ingot" bench -m "$trained" --backend cuda \
                -p 16 -n 128 --reps 3 --draft mtp --draft-max "$k"
        done
    else
        record draft 1 0 "cannot unpack testdata/golden/trained-rust-std/model.gguf.xz"
    fi
fi

summarize device-bench "$out/device-bench.json"
code=$?
echo "full log: $out/device-bench.log; step logs: $LOGS"
exit "$code"
