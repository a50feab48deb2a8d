# Shared by scripts/device-check.sh and scripts/device-bench.sh (sourced, not run).
#
# The GPU machine has Python 3, a CUDA driver and 16 cores but no Rust and no network; what
# travels there is the working tree plus at most 64 MiB of carried files, and only the last
# 12 KB of a run's output comes back. So: binaries are built here and packed into one
# xz archive (Python's tarfile and its built-in lzma module unpack it, no xz program needed;
# xz's 64 MiB window stores the PTX and the code the binaries share once: 150 MB of stripped
# binaries pack to about 6 MB, where gzip's 32 KiB window gave 38 MB); a run prints only each step's tail
# and a summary table, and writes full logs and a JSON summary under $OUT when it is set.

# Bundle layout: $BUNDLE unpacks to bin/ingot, bin/ingot-bench-kernels, tests/<crate>-<test>,
# MANIFEST (one "size path" line per binary), COMMIT (the commit the binaries were built from,
# "-dirty" when the tree had changes: the GPU machine's copy of .git may be older than its tree).
# What one device call may carry, bundle and working tree together: 64 MiB is the tool's hard
# limit; 44 leaves room for the kernels and fixtures of the next rounds (40 until the chained
# kernels of 2026-12-06 put the tree plus the bundle's reserve at 40.2).
CARRY_MAX_MIB=44
# The release bundle's share of that, assumed where no release bundle is built (CI's rehearsal
# builds a dev-profile one): the largest measured so far, 13.0 MiB (fcc9d89, 2026-12-06: 338
# kernels' sm_90a cubin, the demo model in `ingot`), rounded up; `prepare` checks the real bundle.
# The tree and this reserve together leave 1.8 MiB of the 44.
BUNDLE_RESERVE_MIB=14
# Every step of a run shares this deadline (seconds): 5 minutes unless INGOT_DEVICE_DEADLINE_S
# says otherwise (a lease with little device time left). Steps run most valuable first; one the
# deadline leaves out is recorded as "not run: deadline reached".
RUN_DEADLINE_S=${INGOT_DEVICE_DEADLINE_S:-300}
# Architectures whose cubins the release bundle embeds (`cargo xtask cubins`): the lent card is an
# H200. Each adds about 1.1 MiB to the bundle; INGOT_CUBIN_ARCHS=sm_86,sm_90a for a 3090 too.
CUBIN_ARCHS=${INGOT_CUBIN_ARCHS:-sm_90a}
# The commit of the last device check that ran on a GPU (H200, 2026-11-30): kernel tests whose
# file changed since then run first, most recently changed first.
LAST_GPU_RUN=c0415ea

# The kernel test files that have a GPU half (a test that runs only in the simulator is left
# out of the bundle): they use one of the GPU entry points of kernels/tests/support.
gpu_kernel_tests() {
    grep -l -E 'on_every_backend!|sim_matches_gpu\(|support::gpu\(\)|CudaAccelerator' kernels/tests/*.rs |
        xargs -n1 basename | sed 's/\.rs$//' | sort
}

# carried_tree_bytes: bytes of the working tree a device call carries: tracked files and the
# untracked ones git does not ignore, as they are on disk.
carried_tree_bytes() {
    git ls-files -z --cached --others --exclude-standard |
        xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

# check_carry BUNDLE_BYTES LABEL: fails when the tree plus BUNDLE_BYTES exceed CARRY_MAX_MIB.
check_carry() {
    local bundle=$1 label=$2 tree
    tree=$(carried_tree_bytes)
    printf 'carry: working tree %.1f MiB + %s %.1f MiB = %.1f MiB (limit %d MiB)\n' \
        "$(awk "BEGIN {print $tree / 1048576}")" "$label" "$(awk "BEGIN {print $bundle / 1048576}")" \
        "$(awk "BEGIN {print ($tree + $bundle) / 1048576}")" "$CARRY_MAX_MIB"
    if ((tree + bundle > CARRY_MAX_MIB * 1048576)); then
        echo "carry: over the ${CARRY_MAX_MIB} MiB a device call may take: shrink the tree (git ls-files -z | xargs -0 du -b | sort -n | tail) or the bundle" >&2
        return 1
    fi
}

# build_bundle DIR PROFILE LEVEL: builds the GPU binaries with cargo PROFILE (release|dev),
# stages them stripped under DIR/stage and packs DIR/device-bundle.tar.xz (xz preset LEVEL, 0-9).
build_bundle() {
    local dir=$1 profile=$2 level=$3
    local stage=$dir/stage
    rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/tests" || return 1
    local tests
    tests=$(gpu_kernel_tests | tr '\n' ' ')
    echo "device bundle ($profile): kernel tests with a GPU half: $tests"
    if [[ $profile == release ]]; then
        # Relative to the workspace root, where kernels/build.rs resolves INGOT_CUBINS.
        cargo xtask cubins --arch "$CUBIN_ARCHS" --out "$dir/cubin" || return 1
        export INGOT_CUBINS=$dir/cubin
    fi
    {
        if [[ $profile == release ]]; then
            cargo build --release -p ingot --bin ingot --message-format=json &&
                # One invocation for the tests and the bench (built as a test target; with
                # `--bench` it benchmarks), so they share one feature resolution and one build.
                cargo test --release --no-run -p ingot-kernels -p ingot-gates -p ingot-bench \
                    --tests --benches --message-format=json
        else
            # The rehearsal selects what `cargo test --workspace` selected (same packages, so the
            # same features): everything but the bench's test build is already built and reused.
            cargo test --no-run --workspace --tests --benches --message-format=json
        fi
    } | STAGE=$stage TESTS="$tests" python3 -c '
import json, os, shutil, sys
stage, tests = os.environ["STAGE"], set(os.environ["TESTS"].split())
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    m = json.loads(line)
    exe = m.get("executable") if m.get("reason") == "compiler-artifact" else None
    if not exe:
        continue
    pkg, name, kind = m["package_id"], m["target"]["name"], m["target"]["kind"]
    if kind == ["bin"] and name == "ingot" and not m["profile"]["test"]:
        dest = "bin/ingot"
    elif kind == ["bench"] and name == "kernels":
        dest = "bin/ingot-bench-kernels"
    elif kind == ["test"] and "ingot-kernels" in pkg and name in tests:
        dest = "tests/ingot-kernels-" + name
    elif kind == ["test"] and "ingot-gates" in pkg and name == "cuda_gate":
        dest = "tests/ingot-gates-cuda_gate"
    else:
        continue
    shutil.copy(exe, os.path.join(stage, dest))
' || { echo "device bundle: the build failed" >&2; return 1; }
    local want=$(($(wc -w <<<"$tests") + 3)) have
    have=$(find "$stage/bin" "$stage/tests" -type f | wc -l)
    if ((have != want)); then
        echo "device bundle: expected $want binaries, cargo produced $have" >&2
        return 1
    fi
    if command -v strip >/dev/null; then
        strip "$stage"/bin/* "$stage"/tests/* || return 1
    else
        echo "device bundle: no strip here; binaries keep their debug info" >&2
    fi
    (cd "$stage" && find bin tests -type f -exec stat -c '%s %n' {} + | sort -k2 >MANIFEST)
    kernel_test_order $tests >"$stage/ORDER"
    git describe --always --dirty >"$stage/COMMIT" 2>/dev/null || echo unknown >"$stage/COMMIT"
    python3 - "$stage" "$dir/device-bundle.tar.xz" "$level" <<'EOF' || return 1
import os, sys, tarfile
stage, out, level = sys.argv[1], sys.argv[2], int(sys.argv[3])
with tarfile.open(out, "w:xz", preset=level) as tar:
    for name in sorted(os.listdir(stage)):
        tar.add(os.path.join(stage, name), arcname=name)
EOF
    echo "stripped binaries (bytes):"
    sed 's/^/  /' "$stage/MANIFEST"
}

# kernel_test_order TEST...: the kernel tests, one per line, those whose file changed since
# LAST_GPU_RUN first (most recently committed first, uncommitted changes before all), then the rest
# in name order. Without the commit (a shallow clone), name order.
kernel_test_order() {
    local t when changed=() rest=()
    for t in "$@"; do
        if git cat-file -e "$LAST_GPU_RUN^{commit}" 2>/dev/null &&
            ! git diff --quiet "$LAST_GPU_RUN" -- "kernels/tests/$t.rs" 2>/dev/null; then
            if git diff --quiet HEAD -- "kernels/tests/$t.rs" 2>/dev/null; then
                when=$(git log -1 --format=%ct -- "kernels/tests/$t.rs")
            else
                when=9999999999
            fi
            changed+=("$when $t")
        else
            rest+=("$t")
        fi
    done
    ((${#changed[@]})) && printf '%s\n' "${changed[@]}" | sort -k1,1nr -k2 | cut -d' ' -f2
    ((${#rest[@]})) && printf '%s\n' "${rest[@]}" | sort
    return 0
}

# unpack_bundle ARCHIVE DIR: unpacks with Python's tarfile (no tar/xz needed).
unpack_bundle() {
    python3 - "$1" "$2" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as tar:
    tar.extractall(sys.argv[2])
EOF
}

# Step bookkeeping: RESULTS (tab-separated: name, exit status, seconds, key figure) and one
# log per step under LOGS. DEADLINE is in bash SECONDS.
RESULTS=""
LOGS=""
DEADLINE=0

left_s() {
    echo $((DEADLINE - SECONDS))
}

# record NAME STATUS SECONDS FIGURE; STATUS is an exit status, or "skip" for a step not run on
# purpose (FIGURE says why and how to run it), which neither passes nor fails.
record() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4//$'\t'/ }" >>"$RESULTS"
}

# run_step NAME LIMIT_S FIGURE_FN CMD...: runs CMD with its output in LOGS/NAME.log, under
# min(LIMIT_S, time left); prints the log's tail; records the status and FIGURE_FN's figure.
# A failing step never stops the run.
run_step() {
    local name=$1 limit=$2 figure_fn=$3
    shift 3
    local left
    left=$(left_s)
    if ((left < 5)); then
        echo "=== $name: not run, the ${RUN_DEADLINE_S} s deadline is reached"
        record "$name" 124 0 "not run: deadline reached"
        return
    fi
    ((limit > left)) && limit=$left
    local log="$LOGS/$name.log" t0=$SECONDS rc
    echo "=== $name (limit ${limit} s, $(date -u +%T))"
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    ((rc == 124 || rc == 137)) && echo "(timed out after ${limit} s)" >>"$log"
    tail -n 6 "$log" | cut -c1-240 | sed 's/^/  | /'
    local figure
    figure=$("$figure_fn" "$log" 2>/dev/null | head -n 1 | cut -c1-160)
    if ((rc != 0)) && failed_for_no_gpu "$log"; then
        figure="no GPU found${figure:+; $figure}"
    fi
    record "$name" "$rc" $((SECONDS - t0)) "$figure"
}

# failed_for_no_gpu LOG: whether LOG says "no GPU found" and every panic in it (the line after
# libtest's "panicked at") says so too, so one test failing for another reason is not hidden
# among tests that failed for want of a GPU.
failed_for_no_gpu() {
    awk '/panicked at/ { if ((getline m) > 0) { if (m ~ /no GPU found/) seen = 1; else bad = 1 } next }
         /no GPU found/ { seen = 1 }
         END { exit !(seen && !bad) }' "$1"
}

# Key figures of the steps (first line of output is used).
fig_tests() { grep -E '^test result:' "$1" | tail -n 1 | sed 's/^test result: //; s/ finished in.*//'; }
fig_smoke() {
    local jit
    jit=$(grep -m 1 -oE 'module loaded \([^)]*\): jit [0-9]* ms, cuModuleLoadDataEx [0-9]* ms' "$1" |
        sed 's/^module loaded //')
    grep -q 'agree bit for bit' "$1" && echo "$jit; quantize_q8_1 GPU = ptx-sim bit for bit" || echo "$jit"
}
fig_gate() {
    local s
    s=$(grep -E 'gate vs' "$1" | sed -E 's/.*(gate vs [A-Za-z]+).*: (PASS|FAIL)$/\1 \2/' | sort | uniq -c |
        awk '{printf "%s%s", sep, $0; sep="; "}')
    echo "${s:-$(fig_tests "$1")}"
}
fig_decode() {
    awk -F'|' '/ tg[0-9]/ {gsub(/ +/, " ", $7); gsub(/ +/, " ", $8); printf "%s%s:%s t/s", sep, $7, $8; sep=";"}' "$1"
}
fig_bench() {
    grep -m 1 -o 'device-to-device copy: [0-9.]* GB/s' "$1" | tr '\n' ' '
    grep -m 1 -oE 'bench (valid|INVALID)' "$1"
}
fig_nodes() { grep -m 1 -o 'measured d[0-9]*: node sum [^(]*' "$1"; }
# `ingot bench --draft mtp`'s drafted rows: t/s, acceptance, tokens per step, speed-up.
fig_draft() {
    awk -F'|' '/^\|.* mtp k[0-9]/ {for (i = 5; i <= 9; i++) gsub(/^ +| +$/, "", $i);
        printf "%s%s: %s t/s, acceptance %s, %s tokens/step, %s", sep, $5, $6, $7, $8, $9; sep="; "}' "$1"
}
# scripts/device-peer.sh's verdict or summary: its last "peer: " line.
fig_peer() { grep '^peer: ' "$1" | tail -n 1 | sed 's/^peer: //'; }
fig_none() { :; }

# witness: the card and driver, never failing (nvidia-smi may be missing).
witness() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu \
            --format=csv,noheader 2>&1 | sed 's/^/gpu: /' || true
    else
        echo "gpu: nvidia-smi not found (the steps below say whether the driver opens a GPU)"
    fi
}

# summarize TITLE JSON_PATH: prints the table of RESULTS and writes the JSON summary (Python's
# json module) to JSON_PATH when it is not empty. Exit status: 0 when every step that ran passed, 3
# when every failing step failed for want of a GPU ("no GPU found"), 1 otherwise; a "skip" step
# is shown and counted apart, and changes none of these.
summarize() {
    python3 - "$RESULTS" "$1" "${2:-}" "$SECONDS" <<'EOF'
import json, sys
results, title, out, elapsed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
steps = []
with open(results) as f:
    for line in f:
        name, status, secs, figure = (line.rstrip("\n").split("\t") + [""])[:4]
        skipped = status == "skip"
        steps.append({"step": name, "exit": None if skipped else int(status), "skipped": skipped,
                      "seconds": int(secs), "figure": figure})
skipped = [s for s in steps if s["skipped"]]
failed = [s for s in steps if not s["skipped"] and s["exit"] != 0]
no_gpu = [s for s in failed if s["figure"].startswith("no GPU found")]
if not failed:
    verdict, code = "pass", 0
elif len(no_gpu) == len(failed):
    verdict, code = "no GPU found", 3
else:
    verdict, code = "fail", 1
w = max([len(s["step"]) for s in steps] + [4])
ran = len(steps) - len(skipped)
also = f", {len(skipped)} not run on purpose" if skipped else ""
print(f"\n==== {title}: {verdict} ({ran - len(failed)}/{ran} steps passed{also}, {elapsed} s)")
print(f"{'step':<{w}}  exit  secs  key figure")
for s in steps:
    mark = "skip" if s["skipped"] else "ok" if s["exit"] == 0 else str(s["exit"])
    print(f"{s['step']:<{w}}  {mark:>4}  {s['seconds']:>4}  {s['figure']}")
summary = {"title": title, "verdict": verdict, "exit": code, "seconds": elapsed, "steps": steps}
if out:
    with open(out, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
if code == 3:
    print(f"{title}: no GPU found: all {len(failed)} failing step(s) failed because no GPU was found")
elif code == 1:
    others = ", ".join(s["step"] for s in failed if s not in no_gpu)
    print(f"{title}: FAILED: {others}")
sys.exit(code)
EOF
}
