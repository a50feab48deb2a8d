#!/usr/bin/env bash
# llama.cpp's llama-bench beside `ingot bench --backend cpu` on this CPU, same file, alternating, and the table
# with both engines and the ratio per test (scripts/peer-table.py, shared with the GPU side by side).
#
#   scripts/cpu-peer.sh MODEL OUTDIR
#
# Environment (all optional):
#   LLAMA_BENCH   llama-bench to run (default: llama-bench on PATH). docs/perf.md, "CPU side by side", says how
#                 to build it outside the repository, for the native ISA or for AVX2 only.
#   INGOT         the ingot binary (default: target/release/ingot, built by `cargo build --release`).
#   INGOT_CPU_ISA the instruction set ingot's kernels use (scalar, avx2, avx512, avxvnni; default: the best the
#                 CPU has); pair avx2 with an AVX2-only llama-bench. The witness line of each report names it.
#   THREADS       threads for both engines (default: 2).
#   ROUNDS        rounds; each runs llama.cpp, then ingot (default: 3).
#   PROMPTS       prompt-processing tests (default: 64,512).
#   DEPTHS        depths of the decode tests (default: 0,4096,8192,16384).
#   N_GEN         tokens per decode test (default: 16).
#   REPS          repetitions per test inside one run (default: 3).
#   LLAMA_ARGS    more llama-bench arguments for every test (e.g. `-ctk q8_0`; default: none).
#   INGOT_ARGS    more `ingot bench` arguments for every test (e.g. `--cache-type q8_0`; default: none).
#
# OUTDIR gets llama.cpp-rN.json and ingot-rN.json per round, table.md and table.json. Exit status 1 when an
# engine fails; its stderr is in OUTDIR.
set -euo pipefail

[ $# -eq 2 ] || { sed -n '2,24p' "$0" >&2; exit 2; }
model=$1 out=$2
[ -f "$model" ] || { echo "cpu-peer: no model file at $model" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
llama=${LLAMA_BENCH:-llama-bench}
ingot=${INGOT:-$here/../target/release/ingot}
threads=${THREADS:-2} rounds=${ROUNDS:-3} prompts=${PROMPTS:-64,512}
depths=${DEPTHS:-0,4096,8192,16384} n_gen=${N_GEN:-16} reps=${REPS:-3}
read -r -a llama_args <<<"${LLAMA_ARGS:-}"
read -r -a ingot_args <<<"${INGOT_ARGS:-}"
command -v "$llama" >/dev/null || { echo "cpu-peer: no llama-bench at '$llama' (set LLAMA_BENCH)" >&2; exit 1; }
[ -x "$ingot" ] || { echo "cpu-peer: no ingot binary at $ingot (cargo build --release, or set INGOT)" >&2; exit 1; }
mkdir -p "$out"

# One llama-bench round: the prompt tests at depth 0 and the decode tests at every depth, in two runs (one run
# would also time every prompt length at every depth), merged into one JSON list.
llama_round() {
    local r=$1 pp=$out/llama.cpp-r$r-pp.json tg=$out/llama.cpp-r$r-tg.json
    "$llama" -m "$model" -t "$threads" -p "$prompts" -n 0 -r "$reps" "${llama_args[@]}" -o json >"$pp" 2>"$out/llama.cpp-r$r.err"
    "$llama" -m "$model" -t "$threads" -p 0 -n "$n_gen" -d "$depths" -r "$reps" "${llama_args[@]}" -o json >"$tg" 2>>"$out/llama.cpp-r$r.err"
    python3 -c 'import json, sys; json.dump(json.load(open(sys.argv[1])) + json.load(open(sys.argv[2])), open(sys.argv[3], "w"), indent=1)' \
        "$pp" "$tg" "$out/llama.cpp-r$r.json"
    rm "$pp" "$tg"
}

# One ingot round, the same tests; ingot bench puts the prompt tests at every depth too, so two runs as well.
ingot_round() {
    local r=$1 pp=$out/ingot-r$r-pp.json tg=$out/ingot-r$r-tg.json
    RAYON_NUM_THREADS=$threads "$ingot" bench -m "$model" --backend cpu -p "$prompts" -n 0 -d 0 --reps "$reps" "${ingot_args[@]}" --json \
        >"$pp" 2>"$out/ingot-r$r.err"
    RAYON_NUM_THREADS=$threads "$ingot" bench -m "$model" --backend cpu -p 0 -n "$n_gen" -d "$depths" --reps "$reps" "${ingot_args[@]}" \
        --json >"$tg" 2>>"$out/ingot-r$r.err"
    python3 -c 'import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
a["results"] += b["results"]
json.dump(a, open(sys.argv[3], "w"), indent=1)' "$pp" "$tg" "$out/ingot-r$r.json"
    rm "$pp" "$tg"
}

for r in $(seq 1 "$rounds"); do
    echo "cpu-peer: round $r of $rounds: llama.cpp" >&2
    llama_round "$r" || { echo "cpu-peer: llama-bench failed, see $out/llama.cpp-r$r.err" >&2; exit 1; }
    echo "cpu-peer: round $r of $rounds: ingot" >&2
    ingot_round "$r" || { echo "cpu-peer: ingot bench failed, see $out/ingot-r$r.err" >&2; exit 1; }
done
python3 "$here/peer-table.py" "$out" "$out/table.json" | tee "$out/table.md"
