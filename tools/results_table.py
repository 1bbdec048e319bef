#!/usr/bin/env python3
"""Render benchmark result lines (bench/results/*.jsonl, docs/design.md §10.3) as markdown tables, one per bench.

By default only the newest row of each measured point is shown (rows are ordered by date, then by their order in
the files; a point is the bench's identifying fields, e.g. op, shape, ranks, tokens, sms for `ep`), with the
columns that tell code versions apart (date, commit, variant). Filters narrow the rows before that choice.

examples:
  tools/results_table.py                                  # every bench, newest row per point
  tools/results_table.py --bench moe --shape flash        # fused vs composed at Flash
  tools/results_table.py --bench ep --commit 7536afd      # rows of one commit (prefix match)
  tools/results_table.py --variant "session 3" --all      # every row whose variant contains the text
  tools/results_table.py --since 2026-11-30 bench/results/2026-11-30-nvidia-h200-x2-gemm.jsonl
"""
import argparse
import glob
import json
import os
import sys

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "results")

# The fields that identify one measured point of each bench (a newer row of the same point replaces an older one).
POINT_KEYS = {
    "p2p": ["gpu", "op", "backend", "shape", "src", "dst", "ranks", "sms"],
    "ep": ["gpu", "op", "shape", "dtype", "ranks", "tokens", "sms", "skip"],
    "gemm": ["gpu", "op", "shape", "experts", "m", "n", "k"],
    "moe": ["gpu", "op", "shape", "weights", "routing", "ranks", "tokens", "sms"],
    "stream": ["gpu", "op", "shape", "box_rows", "stages", "with_a", "ctas_per_sm", "hold_cycles"],
}
DEFAULT_COLS = {
    "p2p": ["date", "commit", "op", "backend", "src", "dst", "sms", "time_us", "gbps"],
    "ep": ["date", "commit", "op", "shape", "ranks", "tokens", "sms", "time_us", "gbps", "nvl_gbps", "ceiling_gbps",
           "baseline_time_us", "variant"],
    "gemm": ["date", "commit", "op", "shape", "experts", "m", "n", "k", "time_us", "tflops", "weight_gbps",
             "baseline_tflops", "ratio_vs_baseline", "variant"],
    "moe": ["date", "commit", "op", "shape", "ranks", "tokens", "time_us", "tflops", "hbm_gbps", "nvl_gbps",
            "speedup_vs_composed", "variant"],
    "stream": ["date", "commit", "op", "box_rows", "stages", "with_a", "ctas_per_sm", "hold_cycles", "time_us", "gbps",
               "hbm_ceiling_gbps", "fraction_of_ceiling", "variant"],
}
GENERIC_POINT = ["gpu", "op", "shape", "ranks", "tokens", "sms"]
# Point fields that some rows do not write, with the value they stand for: an ep row without "skip" (written before
# `bench ep --skip` existed, 2026-11-29, or after it was removed, 2026-12-03) times the whole kernels, i.e. skip 0.
POINT_DEFAULTS = {"ep": {"skip": 0}}


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
    s = str(v)
    return s.replace("|", "\\|")


def load(paths):
    """Rows of every file (directories: their *.jsonl), in date order, then file order, then line order."""
    files = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, "*.jsonl"))) if os.path.isdir(p) else [p]
    rows = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as e:
                    sys.exit(f"{path}:{number}: not JSON ({e})")
                row.setdefault("bench", os.path.basename(path).rsplit("-", 1)[-1].replace(".jsonl", ""))
                row["_order"] = len(rows)
                rows.append(row)
    rows.sort(key=lambda r: (str(r.get("date", "")), r["_order"]))
    return rows


def keep(row, args):
    def field(name):
        return str(row.get(name, ""))
    if args.bench and field("bench") not in args.bench:
        return False
    if args.commit and not any(field("commit").startswith(c) for c in args.commit):
        return False
    if args.variant and args.variant.lower() not in field("variant").lower():
        return False
    if args.op and field("op") not in args.op:
        return False
    if args.shape and field("shape") not in args.shape:
        return False
    if args.gpu and field("gpu") not in args.gpu:
        return False
    if args.date and field("date") != args.date:
        return False
    if args.since and field("date") < args.since:
        return False
    if args.until and field("date") > args.until:
        return False
    return True


def newest_per_point(rows):
    """The last row of each point, in the order the points first appeared."""
    newest = {}
    for r in rows:
        keys = POINT_KEYS.get(r.get("bench"), GENERIC_POINT)
        defaults = POINT_DEFAULTS.get(r.get("bench"), {})
        newest[(r.get("bench"),) + tuple(json.dumps(r.get(k, defaults.get(k))) for k in keys)] = r
    return sorted(newest.values(), key=lambda r: r["_order"])


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", default=[RESULTS_DIR],
                    help="result files or directories of *.jsonl (default: bench/results)")
    ap.add_argument("--bench", action="append", help="p2p | ep | gemm | moe | stream (repeatable)")
    ap.add_argument("--commit", action="append", help="commit or commit prefix (repeatable)")
    ap.add_argument("--variant", help="rows whose variant contains this text (case-insensitive)")
    ap.add_argument("--op", action="append", help="op, e.g. fused, composed, dispatch (repeatable)")
    ap.add_argument("--shape", action="append", help="shape, e.g. flash, v3, l1 (repeatable)")
    ap.add_argument("--gpu", action="append", help="device kind, e.g. nvidia-h200-x2 (repeatable)")
    ap.add_argument("--date", help="rows of this date (YYYY-MM-DD)")
    ap.add_argument("--since", help="rows from this date on (YYYY-MM-DD)")
    ap.add_argument("--until", help="rows up to this date (YYYY-MM-DD)")
    ap.add_argument("--all", action="store_true", help="every matching row, not only the newest per point")
    ap.add_argument("--cols", help="comma-separated columns (default: per bench)")
    return ap.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    rows = [r for r in load(args.paths) if keep(r, args)]
    shown = rows if args.all else newest_per_point(rows)
    print(f"{len(rows)} matching rows; {'all shown' if args.all else f'{len(shown)} newest per point'}\n")
    benches = []
    for r in shown:
        if r.get("bench") not in benches:
            benches.append(r.get("bench"))
    for bench in benches:
        group = [r for r in shown if r.get("bench") == bench]
        cols = args.cols.split(",") if args.cols else DEFAULT_COLS.get(bench, sorted(k for k in group[0] if k[0] != "_"))
        cols = [c for c in cols if any(c in r for r in group)]
        print(f"### {bench}: {len(group)} rows\n")
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for r in group:
            print("| " + " | ".join(fmt(r.get(c)) for c in cols) + " |")
        print()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # `| head`
        sys.exit(0)
