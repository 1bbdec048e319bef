#!/usr/bin/env bash
# Copies what the GPU machine needs (the CLI, every gpu_test_* binary, the device scripts) from a build folder into a
# small git-ignored folder that the device tool can carry (64 MiB limit: object files stay here).
# usage: tools/pack-device.sh [build dir] [dest]
set -euo pipefail
build=${1:-build}
dest=${2:-.dev/bin}
rm -rf "$dest" && mkdir -p "$dest"
cp "$build/symmoe" "$dest/"
for f in "$build"/gpu_test_*; do [ -x "$f" ] && cp "$f" "$dest/"; done
strip --strip-debug "$dest"/* 2>/dev/null || true
# The commit the binaries were built from (the GPU machine gets no .git): device-check.sh exports it as
# SYMMOE_COMMIT, so result lines name it; "-dirty" when the build tree had uncommitted changes.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ "$commit" != unknown ] && ! git diff --quiet HEAD 2>/dev/null && commit="$commit-dirty"
echo "$commit" > "$dest/COMMIT"
du -sh "$dest"
ls -la "$dest"
