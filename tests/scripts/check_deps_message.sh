#!/usr/bin/env bash
# ctest deps_message_names_missing: `make build` with one Debian package hidden (tools/install-deps.sh
# --pretend-missing) must exit non-zero, print the message naming that package and the apt-get line, and stop before
# CMake configures or anything compiles (the build folder must not exist afterwards).
# Usage: check_deps_message.sh SOURCE_DIR PACKAGE
set -uo pipefail
src=$1 pkg=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$(make -C "$src" --no-print-directory build BUILD="$tmp/build" DEPS_FLAGS="--check --pretend-missing $pkg" 2>&1)
rc=$?
fail() { echo "FAIL: $*"; echo "---- output of make build (exit $rc) ----"; echo "$out"; exit 1; }
[ $rc -ne 0 ] || fail "make build exited 0 with $pkg hidden"
grep -q -- "^  - $pkg: " <<<"$out" || fail "the message does not name $pkg"
grep -q -- "^  apt-get install -y .*\b$pkg\b" <<<"$out" || fail "no apt-get line with $pkg"
[ ! -e "$tmp/build" ] || fail "$tmp/build exists: make configured or compiled before the check stopped it"
echo "ok: make build stopped before configuring, naming $pkg and the apt-get line"
