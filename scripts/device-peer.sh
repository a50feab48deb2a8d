#!/usr/bin/env bash
# llama.cpp's llama-bench beside ingot: the helpers of the device check's `peer` step and of
# `scripts/device-bench.sh peer`. The peer bundle (dist/peer-bundle.tar.xz, from `cargo xtask
# peer`) unpacks to bin/llama-bench (static but for glibc and the driver's libcuda.so.1),
# rehearse/libcuda.so.1 (a stand-in driver whose every function returns CUDA_ERROR_NO_DEVICE),
# BUILD and MANIFEST.
#
#   scripts/device-peer.sh probe DIR          # DIR: the unpacked bundle. Whether llama-bench loads
#                                             # (every library resolves, it runs) and whether it sees
#                                             # a CUDA GPU: exit 0 with one, 3 saying "no GPU found"
#                                             # without, 1 when it does not load or run
#   scripts/device-peer.sh json OUT CMD...    # CMD's stdout (a JSON report) into OUT, its stderr
#                                             # to ours; CMD's exit status
#   scripts/device-peer.sh pp OUT CMD...      # the same for a llama-bench prompt-processing run,
#                                             # which may need cuBLAS: the bundle's stand-in then
#                                             # aborts it, and that outcome is reported (exit 0,
#                                             # OUT's .note says which function) as "needs
#                                             # cuBLAS", not as a failure
#
# The stand-in driver is put on the library path only where the system has no libcuda.so.1 (no
# NVIDIA driver: CI's rehearsal), so it can never shadow a real driver.
set -uo pipefail

# peer_libpath DIR: prints the LD_LIBRARY_PATH llama-bench needs: empty where the system loads
# libcuda.so.1, else DIR/rehearse (the stand-in driver).
peer_libpath() {
    if python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
        echo ""
    else
        echo "$1/rehearse"
    fi
}

probe() {
    local dir=$1 exe=$1/bin/llama-bench libpath
    if [[ ! -x $exe ]]; then
        echo "peer: $exe is missing or not executable"
        return 1
    fi
    head -n 2 "$dir/BUILD" 2>/dev/null | sed 's/^/peer bundle: /'
    libpath=$(peer_libpath "$dir")
    if [[ -n $libpath ]]; then
        echo "peer: this machine has no libcuda.so.1 (no NVIDIA driver); loading llama-bench against the bundle's stand-in driver"
    fi
    if command -v ldd >/dev/null; then
        local deps
        deps=$(LD_LIBRARY_PATH=$libpath ldd "$exe" 2>&1)
        sed 's/^/  ldd: /' <<<"$deps"
        if grep -q 'not found' <<<"$deps"; then
            echo "peer: llama-bench does not load: a library above is not found"
            return 1
        fi
    fi
    local listing rc
    listing=$(LD_LIBRARY_PATH=$libpath timeout 60 "$exe" --list-devices 2>&1)
    rc=$?
    sed 's/^/  llama-bench --list-devices: /' <<<"$listing"
    if ((rc != 0)); then
        echo "peer: llama-bench --list-devices failed (exit $rc): it does not load or run here"
        return 1
    fi
    local gpu
    gpu=$(grep -m 1 -E '^ *CUDA[0-9]+:' <<<"$listing" | sed 's/^ *//')
    if [[ -n $gpu ]]; then
        echo "peer: llama-bench loads and sees $gpu"
        return 0
    fi
    echo "peer: llama-bench loads (every library resolved) and lists no CUDA device: no GPU found"
    return 3
}

json() {
    local out=$1 rc
    shift
    "$@" >"$out"
    rc=$?
    ((rc == 0)) && summary "$out"
    return "$rc"
}

# summary OUT: one "peer: <test> <t/s>; ..." line from a report (the step's key figure).
summary() {
    python3 -B - "$1" "$(dirname "$0")" <<'EOF' || echo "peer: $1 is not a readable report"
import json, sys
sys.path.insert(0, sys.argv[2])
table = __import__("peer-table")
with open(sys.argv[1]) as f:
    tests = table.tests_of(json.load(f))
print("peer: " + "; ".join(f"{t} {v:.1f}" for t, v in sorted(tests.items(), key=lambda kv: table.order(kv[0]))) + " t/s")
EOF
}

pp() {
    local out=$1 log rc
    shift
    log=$(mktemp) || return 1
    "$@" >"$out" 2> >(tee "$log" >&2)
    rc=$?
    wait
    if ((rc != 0)) && grep -q 'cuBLAS was called' "$log"; then
        local called
        called=$(grep -m 1 -o 'cuBLAS was called ([^)]*)' "$log")
        echo "peer: prompt processing needs cuBLAS ($called), which the bundle does not carry: not measured"
        echo "needs cuBLAS: $called" >"${out%.json}.note"
        rm -f "$out" "$log"
        return 0
    fi
    rm -f "$log"
    return "$rc"
}

case "${1:-}" in
probe) probe "$2" ;;
json) shift && json "$@" ;;
pp) shift && pp "$@" ;;
*)
    echo "usage: $0 probe DIR | json OUT CMD... | pp OUT CMD..." >&2
    exit 2
    ;;
esac
