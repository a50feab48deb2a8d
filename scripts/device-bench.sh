#!/usr/bin/env bash
# Kernel microbenchmarks and end-to-end decode throughput on a GPU machine with a CUDA driver
# and Python 3 but no Rust toolchain. Uses the bundle of scripts/device-check.sh.
#
#   scripts/device-check.sh prepare   # here, with Rust: dist/device-bundle.tar.xz (<= 40 MiB)
#   scripts/device-bench.sh [run]     # on the GPU machine, in the repository root, with the
#                                     # bundle carried along
#   scripts/device-bench.sh decode    # model, decode and nodes only (device-check has run the
#                                     # kernel benches in the same lease)
#   scripts/device-bench.sh nodes     # model and nodes only (the per-node times)
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
#           programmatic dependent launch), so the two rows measure what early launch gains
#   nodes-d0, nodes-d4096
#           `ingot plan --measure --predict h200` on it: every node of one decode step timed
#           between CUDA events (median of 20 reps) beside its predicted time, the graph replay
#           and the eager step of the same run, and measured/predicted per kernel; the full
#           table is in the step's log
# then a summary table. With $OUT set: full log, step logs and device-bench.json go there.
# INGOT_REQUIRE_GPU=1 is set: without a GPU every step fails saying "no GPU found" (exit 3).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=scripts/device-lib.sh
. scripts/device-lib.sh

BUNDLE=dist/device-bundle.tar.xz
BENCH_TMP=${BENCH_TMP:-/tmp}

mode=${1:-run}
if [[ $mode != run && $mode != decode && $mode != nodes ]]; then
    echo "usage: $0 [run|decode|nodes]   (build the bundle with: scripts/device-check.sh prepare)" >&2
    exit 2
fi
if [[ ! -f $BUNDLE ]]; then
    echo "device-bench: no $BUNDLE: run 'scripts/device-check.sh prepare' on a machine with Rust and carry it" >&2
    exit 2
fi
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
if [[ -f $model ]]; then
    record model 0 0 "reused $model"
else
    run_step model 240 fig_none "$bin/ingot" synth --preset v2-lite --quant q4_k_m -o "$model"
fi
if [[ $mode != nodes ]]; then
    run_step decode 300 fig_decode "$bin/ingot" bench -m "$model" --backend cuda \
        --depths 0,1024,4096 -n 64 --reps 5
    INGOT_NO_PDL=1 run_step decode_no_pdl 150 fig_decode "$bin/ingot" bench -m "$model" \
        --backend cuda --depths 0,4096 -n 64 --reps 5
fi
for depth in 0 4096; do
    run_step "nodes-d$depth" 150 fig_nodes "$bin/ingot" plan -m "$model" --backend cuda --measure \
        --reps 20 --depth "$depth" --predict h200
done

summarize device-bench "$out/device-bench.json"
code=$?
echo "full log: $out/device-bench.log; step logs: $LOGS"
exit "$code"
