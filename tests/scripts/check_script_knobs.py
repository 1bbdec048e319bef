#!/usr/bin/env python3
"""Every SYMMOE_* environment variable that a committed script reads or sets is a known knob (src/common/env.cpp,
listed by `symmoe info`): otherwise `import symmoe` and every CLI run under that script warns about an unknown name
(session 9: DeepEP's runner set SYMMOE_SKIP_BUILD and python/tests/test_env.py saw the warning).
Scans shell scripts (.sh, .ci/run: $SYMMOE_X, ${SYMMOE_X...}, SYMMOE_X=) and Python files (os.environ / getenv with a
quoted "SYMMOE_X"). Exits 1 naming each unknown variable and where it is used.
usage: check_script_knobs.py --cli build/symmoe --root .
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

SHELL_USE = re.compile(r"\$\{?(SYMMOE_[A-Z0-9_]+)|\b(SYMMOE_[A-Z0-9_]+)=")
PY_USE = re.compile(r"(?:environ(?:\.get)?\s*[\[(]|getenv\s*\(|setenv\s*\(\s*)\s*[\"'](SYMMOE_[A-Z0-9_]+)[\"']")
# Names the tests use on purpose as unknown (the misspelling warning's own tests).
DELIBERATELY_UNKNOWN = {"SYMMOE_EP_SMSS"}


def known_knobs(cli):
    out = subprocess.run([cli, "info"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"^\s+(SYMMOE_[A-Z0-9_]+)\s", out, re.M))


def uses(root):
    files = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True)
    for rel in files.stdout.split():
        path = root / rel
        if rel.endswith(".sh") or rel == ".ci/run":
            pattern = SHELL_USE
        elif rel.endswith(".py"):
            pattern = PY_USE
        else:
            continue
        for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in pattern.finditer(line):
                yield next(g for g in m.groups() if g), f"{rel}:{lineno}"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cli", required=True, help="path of the symmoe executable")
    ap.add_argument("--root", required=True, help="repository root (a git checkout)")
    args = ap.parse_args()
    known = known_knobs(args.cli)
    if not known:
        print("`symmoe info` listed no SYMMOE_ knobs: cannot check")
        return 1
    unknown = {}
    for name, where in uses(Path(args.root)):
        if name not in known and name not in DELIBERATELY_UNKNOWN:
            unknown.setdefault(name, []).append(where)
    for name, where in sorted(unknown.items()):
        print(f"{name} is used by {', '.join(where[:4])} but is not a known knob (add it to src/common/env.cpp)")
    print(f"{len(known)} known knobs; {len(unknown)} unknown names used by scripts")
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
