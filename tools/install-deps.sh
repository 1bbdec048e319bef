#!/usr/bin/env bash
# The Debian packages that `make run` and `make test` need, checked before anything compiles (the Makefile's build
# target and .ci/run both call this script: it is the one list).
#   as root:      installs what is missing with apt-get, then checks again
#   otherwise:    prints ONE message naming every missing package and the apt-get line, exits 1
# Flags:
#   --check                   never install, only report (exit 1 when something is missing)
#   --pretend-missing PKG     treat PKG as missing although it is installed (repeatable; the ctest
#                             deps_message_names_missing proves the message path with it)
#   --list                    print the package table and exit
# The CUDA 13 toolkit (nvcc, NCCL) is not a Debian package: without it CMake configures a CPU-only build and its
# configure summary says so; this script only notes it.
set -euo pipefail

# Debian's interpreter: CMake builds the Python module and runs the Python tests with it (CMakeLists.txt).
py=/usr/bin/python3

# One row per package: name | the test that finds it installed | what needs it.
packages=(
  "cmake|command -v cmake|configure (CMake >= 3.25)"
  "ninja-build|command -v ninja|the build tool CMake generates for"
  "g++|command -v g++|C++20 compiler (host code, nvcc's host compiler)"
  "make|command -v make|the Makefile's quick-start targets"
  "git|command -v git|the build's commit in --version and result lines; ctest format_check"
  "libgtest-dev|test -f /usr/include/gtest/gtest.h|the CPU and GPU test binaries"
  "nlohmann-json3-dev|test -f /usr/include/nlohmann/json.hpp|benchmark result lines (symmoe bench, symmoe_tool_tests)"
  "python3-dev|$py -c 'import os, sysconfig; assert os.path.exists(sysconfig.get_paths()[\"include\"] + \"/Python.h\")'|the Python module symmoe._C"
  "pybind11-dev|test -f /usr/include/pybind11/pybind11.h|the Python module symmoe._C"
  "python3-numpy|$py -c 'import numpy'|the Python package's CPU paths and ctest python_tests"
  "python3-pytest|$py -c 'import pytest'|ctest python_tests"
  "python3-matplotlib|$py -c 'import matplotlib'|ctest plot_results (docs/figures)"
  "clang-format|command -v clang-format|ctest format_check (.clang-format)"
)

check_only=0
pretend=()
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check_only=1 ;;
    --pretend-missing)
      [ $# -ge 2 ] || { echo "install-deps.sh: --pretend-missing needs a package name" >&2; exit 2; }
      pretend+=("$2"); shift ;;
    --list)
      for row in "${packages[@]}"; do IFS='|' read -r name _ why <<<"$row"; printf '%-20s %s\n' "$name" "$why"; done
      exit 0 ;;
    *) echo "install-deps.sh: unknown argument '$1' (valid: --check, --pretend-missing PKG, --list)" >&2; exit 2 ;;
  esac
  shift
done
for name in "${pretend[@]+"${pretend[@]}"}"; do
  known=0
  for row in "${packages[@]}"; do [ "${row%%|*}" = "$name" ] && known=1; done
  [ $known = 1 ] || { echo "install-deps.sh: --pretend-missing '$name' is not one of the checked packages" \
                           "(tools/install-deps.sh --list)" >&2; exit 2; }
done

# Fills `missing` (package names) and `reasons` (what each is for).
find_missing() {
  missing=() reasons=()
  for row in "${packages[@]}"; do
    IFS='|' read -r name test why <<<"$row"
    local hidden=0
    for p in "${pretend[@]+"${pretend[@]}"}"; do [ "$p" = "$name" ] && hidden=1; done
    if [ $hidden = 1 ] || ! bash -c "$test" >/dev/null 2>&1; then
      missing+=("$name") reasons+=("$name: $why")
    fi
  done
}

find_missing
if [ ${#missing[@]} -gt 0 ] && [ $check_only = 0 ] && [ "$(id -u)" = 0 ] && [ ${#pretend[@]} = 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  find_missing
fi
if [ ${#missing[@]} -gt 0 ]; then
  {
    echo "symmoe: ${#missing[@]} Debian package(s) missing, nothing was compiled:"
    for r in "${reasons[@]}"; do echo "  - $r"; done
    echo "Install them (as root), then run make again:"
    echo "  apt-get install -y ${missing[*]}"
  } >&2
  exit 1
fi
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: nvcc not found (CUDA 13 toolkit in /usr/local/cuda): CMake will configure a CPU-only build"
fi
echo "install-deps: all ${#packages[@]} Debian packages present"
