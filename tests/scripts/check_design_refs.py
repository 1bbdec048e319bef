#!/usr/bin/env python3
"""ctest design_refs: the design the code cites is in the repository.

Fails when a source file under src/ include/ tests/ bench/ tools/ python/
  - cites the design brief outside the repository (by its file name) or one of its seed documents (by number), or
  - points at a section ("docs/design.md §4.4", "docs/scale-out.md §2, §3") that the named file does not have.
A "§N.M" belongs to the nearest "docs/<name>.md" before it in the same comment (at most a few lines back); a "§"
with no file before it is an error too. A file's sections are its numbered headings ("## 4. Numerics",
"### 4.4 FP4 weights").

Usage: check_design_refs.py REPO_ROOT
"""
import os
import re
import sys

SCANNED_DIRS = ("src", "include", "tests", "bench", "tools", "python")
CODE_SUFFIXES = (".cpp", ".hpp", ".cu", ".cuh", ".h", ".inc", ".py", ".pyi", ".sh", ".cmake", ".in")
# Built from pieces so that this file does not match itself.
OUTSIDE_BRIEF = re.compile(r"\b" + "DESIGN" + r"\.md\b")
SEED_CITATION = re.compile(r"\bseeds?\s+0\d\d\b|\bseeds/0\d\d", re.IGNORECASE)
DOC_NAME = re.compile(r"docs/([A-Za-z0-9_\-/]+\.md)")
SECTION = re.compile(r"§(\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s")
WINDOW = 300  # characters a § may follow its file name by (one comment of a few lines)


def sections_of(root, doc, cache):
    if doc not in cache:
        path = os.path.join(root, "docs", doc)
        found = set()
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    m = HEADING.match(line)
                    if m:
                        found.add(m.group(1))
        cache[doc] = found if os.path.isfile(path) else None
    return cache[doc]


def check_file(root, rel, text, cache, errors):
    def line_of(pos):
        return text.count("\n", 0, pos) + 1

    for m in OUTSIDE_BRIEF.finditer(text):
        errors.append(f"{rel}:{line_of(m.start())}: cites a design document outside the repository "
                      f"('{m.group(0)}'): point to a section of docs/design.md instead")
    for m in SEED_CITATION.finditer(text):
        errors.append(f"{rel}:{line_of(m.start())}: cites a seed document ('{m.group(0)}'): point to a section of "
                      f"docs/design.md instead")
    names = [(m.end(), m.group(1)) for m in DOC_NAME.finditer(text)]
    for m in SECTION.finditer(text):
        before = [(end, doc) for end, doc in names if end <= m.start() and m.start() - end <= WINDOW]
        if not before:
            errors.append(f"{rel}:{line_of(m.start())}: '§{m.group(1)}' names no file (write docs/<file>.md §N)")
            continue
        doc = before[-1][1]
        sections = sections_of(root, doc, cache)
        if sections is None:
            errors.append(f"{rel}:{line_of(m.start())}: docs/{doc} does not exist (cited with §{m.group(1)})")
        elif m.group(1) not in sections:
            errors.append(f"{rel}:{line_of(m.start())}: docs/{doc} has no section {m.group(1)} "
                          f"(its numbered sections: {', '.join(sorted(sections, key=_key)) or 'none'})")


def _key(s):
    return [int(p) for p in s.split(".")]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    cache, errors, scanned, pointers = {}, [], 0, 0
    for top in SCANNED_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d not in ("__pycache__", "results")]
            for name in sorted(filenames):
                if not name.endswith(CODE_SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                scanned += 1
                pointers += len(SECTION.findall(text))
                check_file(root, os.path.relpath(path, root), text, cache, errors)
    if sections_of(root, "design.md", cache) is None:
        errors.append("docs/design.md is missing")
    for e in errors:
        print(e)
    print(f"design_refs: {scanned} files, {pointers} section pointers, {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
