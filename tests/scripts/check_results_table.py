#!/usr/bin/env python3
"""tools/results_table.py: --help works; by default fewer rows than there are lines (the newest per point), --all
every line; filters by bench/op/commit/date keep only matching rows.
usage: check_results_table.py TOOL RESULTS_DIR"""
import glob
import json
import os
import subprocess
import sys


def run(tool, *args):
    r = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stderr}"
    return r.stdout


def table_rows(out):
    """(header, rows) of every markdown table in the output, rows as dicts."""
    tables, header = [], None
    for line in out.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if header is None:
            header = cells
        elif not line.startswith("|---"):
            tables.append(dict(zip(header, cells)))
    return tables


def main(tool, results):
    lines = [json.loads(l) for f in glob.glob(os.path.join(results, "*.jsonl")) for l in open(f) if l.strip()]
    assert "--commit" in run(tool, "--help")

    everything = table_rows(run(tool, results, "--all"))
    assert len(everything) == len(lines), f"--all shows {len(everything)} rows of {len(lines)}"
    newest = table_rows(run(tool, results))
    assert 0 < len(newest) < len(lines), f"default shows {len(newest)} of {len(lines)} rows"

    fused = table_rows(run(tool, results, "--bench", "moe", "--op", "fused", "--all"))
    assert fused and all(r["op"] == "fused" for r in fused)
    assert len(fused) == sum(1 for l in lines if l.get("bench") == "moe" and l.get("op") == "fused")

    commit = next(l["commit"] for l in lines if l.get("commit", "unknown") != "unknown")
    rows = table_rows(run(tool, results, "--commit", commit[:5], "--all"))
    assert rows and all(r["commit"].startswith(commit[:5]) for r in rows)
    assert len(rows) == sum(1 for l in lines if str(l.get("commit", "")).startswith(commit[:5]))

    date = min(l["date"] for l in lines)
    rows = table_rows(run(tool, results, "--until", date, "--all"))
    assert len(rows) == sum(1 for l in lines if l["date"] <= date) and all(r["date"] <= date for r in rows)
    print(f"results_table.py: {len(lines)} lines, {len(newest)} newest per point, filters ok")


if __name__ == "__main__":
    main(*sys.argv[1:3])
