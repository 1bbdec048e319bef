#!/usr/bin/env python3
"""Every line of every bench/results/*.jsonl is strict JSON: one object per line, no NaN/Infinity literals, no raw
control characters in strings (json.loads with strict=True and a parse_constant that refuses the non-standard
constants). Prints each bad line (file:line: reason) and exits 1 if there is one.

usage: check_results_json.py DIR [DIR ...]
"""
import glob
import json
import os
import sys


def refuse_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def check_file(path):
    problems = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line, parse_constant=refuse_constant, strict=True)
            except ValueError as e:
                problems.append(f"{path}:{number}: {e}")
                continue
            if not isinstance(value, dict):
                problems.append(f"{path}:{number}: a {type(value).__name__}, expected one JSON object")
    return problems


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    files = sorted(p for d in argv for p in glob.glob(os.path.join(d, "*.jsonl")))
    if not files:
        print(f"no *.jsonl files under {' '.join(argv)}")
        return 1
    problems = [p for path in files for p in check_file(path)]
    for p in problems:
        print(p)
    print(f"{len(files)} files, {'%d bad lines' % len(problems) if problems else 'every line strict JSON'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
