#!/usr/bin/env python3
"""The table of `scripts/device-bench.sh peer` (llama.cpp and ingot on the same card, same file) and of
`scripts/cpu-peer.sh` (the same on this CPU).

    scripts/peer-table.py DIR [JSON_OUT]

DIR holds each round's reports: `llama.cpp-rN.json` (llama-bench -o json: a list of tests) and
`ingot-rN.json` (ingot bench --json: {"results": [...]}), N = 1, 2, ...; optionally
`llama.cpp-pp512.json` (the prompt-processing attempt, absent when it needed cuBLAS: then
`llama.cpp-pp512.note` says so). Every test's figure is the median of the rounds' means (tokens/s);
the ratio is ingot's over llama.cpp's. Prints a markdown table; writes rows and every round's
figure to JSON_OUT when given. Exit status 1 when a round's report is missing or unreadable.
"""
import json
import os
import re
import statistics
import sys


def test_name(n_prompt, n_gen, n_depth):
    """llama-bench's test column: pp512, tg64, tg64 @ d4096."""
    name = f"pp{n_prompt}" if n_prompt > 0 else f"tg{n_gen}"
    return name + (f" @ d{n_depth}" if n_depth > 0 else "")


def tests_of(report):
    """{test: tokens/s} of one report, llama-bench's list or ingot's object."""
    rows = report["results"] if isinstance(report, dict) else report
    return {test_name(r["n_prompt"], r["n_gen"], r["n_depth"]): r["avg_ts"] for r in rows}


def order(test):
    """tg before pp, shallow before deep."""
    m = re.match(r"(pp|tg)(\d+)(?: @ d(\d+))?$", test)
    return (m.group(1) != "tg", int(m.group(3) or 0), int(m.group(2))) if m else (2, 0, 0)


def fmt(values):
    if not values:
        return None
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.1f}"
    return f"{med:.1f} ({min(values):.1f}-{max(values):.1f})"


def table(rounds_llama, rounds_ingot, pp_llama=None, pp_note=None):
    """Rows (dicts) and the markdown lines. rounds_*: one {test: t/s} per round."""
    tests = sorted({t for r in rounds_llama + rounds_ingot for t in r}, key=order)
    if pp_llama:
        tests = sorted(set(tests) | set(pp_llama), key=order)
    rows, lines = [], []
    n = max(len(rounds_llama), len(rounds_ingot))
    lines.append("| test | llama.cpp t/s | ingot t/s | ingot / llama.cpp |")
    lines.append("| :-- | --: | --: | --: |")
    for t in tests:
        lv = [r[t] for r in rounds_llama if t in r]
        if not lv and pp_llama and t in pp_llama:
            lv = [pp_llama[t]]
        iv = [r[t] for r in rounds_ingot if t in r]
        lm = statistics.median(lv) if lv else None
        im = statistics.median(iv) if iv else None
        ratio = im / lm if lm and im else None
        lcell = fmt(lv) or (pp_note if t.startswith("pp") and pp_note else "not measured")
        icell = fmt(iv) or "not measured"
        rcell = f"{ratio:.2f}x" if ratio else "-"
        lines.append(f"| {t} | {lcell} | {icell} | {rcell} |")
        rows.append({"test": t, "llama_cpp": lv, "ingot": iv, "llama_cpp_median": lm,
                     "ingot_median": im, "ratio": ratio})
    lines.append("")
    lines.append(f"median of {n} rounds' means (min-max across rounds); rounds alternate llama.cpp, ingot")
    return rows, lines


def witness(report):
    """What a report says it ran on: llama-bench's per-test fields, ingot's witness line."""
    if isinstance(report, dict):
        return f"ingot: {report.get('witness', '?')} (backend {report.get('backend', '?')}, type_k {report.get('type_k', '?')})"
    r = report[0] if report else {}
    keys = ["cpu_info", "gpu_info", "backends", "n_threads", "n_gpu_layers", "flash_attn", "n_ubatch", "type_k",
            "build_commit"]
    return "llama.cpp: " + ", ".join(f"{k} {r[k]}" for k in keys if k in r)


def load_rounds(d, prefix, seen):
    """Each round's {test: t/s}; the first report's witness goes to `seen`."""
    out, k = [], 1
    while os.path.exists(os.path.join(d, f"{prefix}-r{k}.json")):
        with open(os.path.join(d, f"{prefix}-r{k}.json")) as f:
            report = json.load(f)
        if k == 1:
            seen.append(witness(report))
        out.append(tests_of(report))
        k += 1
    return out


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    d = argv[1]
    try:
        seen = []
        llama, ingot = load_rounds(d, "llama.cpp", seen), load_rounds(d, "ingot", seen)
        pp, note = None, None
        if os.path.exists(os.path.join(d, "llama.cpp-pp512.json")):
            with open(os.path.join(d, "llama.cpp-pp512.json")) as f:
                pp = tests_of(json.load(f))
        if os.path.exists(os.path.join(d, "llama.cpp-pp512.note")):
            with open(os.path.join(d, "llama.cpp-pp512.note")) as f:
                note = f.read().strip() or None
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"peer-table: cannot read the reports in {d}: {e}", file=sys.stderr)
        return 1
    if not llama or not ingot:
        print(f"peer-table: {d} has {len(llama)} llama.cpp and {len(ingot)} ingot rounds; need both")
        return 1
    rows, lines = table(llama, ingot, pp, note)
    print("\n".join(seen + [""] + lines))
    if len(argv) == 3:
        with open(argv[2], "w") as f:
            json.dump({"rows": rows, "ran_on": seen, "rounds": {"llama_cpp": llama, "ingot": ingot},
                       "llama_cpp_pp512_note": note}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
