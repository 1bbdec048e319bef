#!/usr/bin/env python3
"""Render bench/results/*.jsonl (DESIGN.md "Result files") as markdown tables, one per file.

usage: tools/results_table.py FILE.jsonl [...] [--cols a,b,c]   (default columns depend on the bench)
"""
import json
import sys

DEFAULT_COLS = {
    "p2p": ["op", "backend", "src", "dst", "sms", "time_us", "gbps"],
    "ep": ["op", "shape", "ranks", "tokens", "sms", "time_us", "gbps", "nvl_gbps", "ceiling_gbps", "baseline_time_us"],
    "gemm": ["op", "shape", "experts", "m", "n", "k", "time_us", "tflops", "weight_gbps", "baseline_tflops",
             "ratio_vs_baseline", "variant"],
    "moe": ["op", "shape", "ranks", "tokens", "time_us", "tflops", "hbm_gbps", "nvl_gbps", "speedup_vs_composed"],
}


def fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def main(argv):
    cols = None
    files = []
    i = 0
    while i < len(argv):
        if argv[i] == "--cols":
            cols = argv[i + 1].split(",")
            i += 2
        else:
            files.append(argv[i])
            i += 1
    for path in files:
        rows = [json.loads(line) for line in open(path) if line.strip()]
        if not rows:
            continue
        use = cols or DEFAULT_COLS.get(rows[0].get("bench"), sorted(rows[0].keys()))
        use = [c for c in use if any(c in r for r in rows)]
        print(f"### {path}\n")
        print(f"{len(rows)} rows; gpu {rows[0].get('gpu')}, date {rows[0].get('date')}; commands: "
              + "; ".join(sorted({'`' + r.get('command', '?') + '`' for r in rows})) + "\n")
        print("| " + " | ".join(use) + " |")
        print("|" + "---|" * len(use))
        for r in rows:
            print("| " + " | ".join(fmt(r.get(c, "")) for c in use) + " |")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
