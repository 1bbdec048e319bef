#!/usr/bin/env python3
"""One version everywhere: CMake's project(VERSION) (passed as --version), `symmoe --version`, pyproject.toml and,
when the Python package is built (--python-path), symmoe.__version__. Exits 1 naming each disagreement.
"""
import argparse
import os
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--version", required=True, help="CMake's PROJECT_VERSION")
    ap.add_argument("--cli", required=True, help="path of the symmoe executable")
    ap.add_argument("--pyproject", required=True, help="path of pyproject.toml")
    ap.add_argument("--python-path", help="build/python: also import symmoe from there and compare __version__")
    args = ap.parse_args()

    found = {}
    out = subprocess.run([args.cli, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.match(r"symmoe (\S+) \(commit (\S+?),", out)
    found["symmoe --version"] = m.group(1) if m else f"unparsable: {out!r}"
    with open(args.pyproject, encoding="utf-8") as f:
        m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
    found["pyproject.toml"] = m.group(1) if m else "no version line"
    if args.python_path:
        env = dict(os.environ, PYTHONPATH=args.python_path, PYTHONDONTWRITEBYTECODE="1")
        code = "import sys, symmoe; assert 'torch' not in sys.modules; print(symmoe.__version__)"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        found["symmoe.__version__"] = r.stdout.strip() if r.returncode == 0 else f"import failed: {r.stderr[-300:]}"
    bad = {k: v for k, v in found.items() if v != args.version}
    for k, v in found.items():
        print(f"{k:20} {v}{'' if k not in bad else f'   (expected {args.version})'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
