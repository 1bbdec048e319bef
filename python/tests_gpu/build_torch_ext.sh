#!/usr/bin/env bash
# Builds symmoe._torch_ep, the optional libtorch extension that runs ElasticBuffer's eager dispatch / combine in C++
# (python/src/torch_ext/torch_ep.cpp), against the installed torch (torch.utils.cpp_extension.load: ninja, -O2),
# and puts it next to the symmoe package that `python3 -c "import symmoe"` finds here (the pip-installed one, or
# build/python with PYTHONPATH). It needs only torch, ninja, a C++ compiler, the CUDA headers and
# python/src/ep_capi.hpp: no CMake build folder (it calls symmoe._C through the capsule symmoe._C._ep_capi). Then
# imports it in a fresh process and checks that symmoe chooses it.
# usage (repository root, after `pip install --no-build-isolation .` or with PYTHONPATH=<build>/python):
#   bash python/tests_gpu/build_torch_ext.sh
# Environment: SYMMOE_TORCH_EXT_TIMEOUT seconds for the compile (default 300); MAX_JOBS (torch's) for ninja.
# Exit status: 0 when built, imported and chosen; non-zero with the reason otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
src=python/src/torch_ext/torch_ep.cpp
[ -f "$src" ] || { echo "build_torch_ext: $src not found (run from a symmoe checkout)"; exit 2; }

pkg=$("$py" -c "import os, symmoe; print(os.path.dirname(symmoe.__file__))" 2>&1) || {
  echo "build_torch_ext: symmoe does not import here (pip install --no-build-isolation . first): $pkg"
  exit 2
}
"$py" -c "import torch, torch.utils.cpp_extension" || { echo "build_torch_ext: torch does not import"; exit 2; }
command -v ninja > /dev/null || "$py" -c "import ninja" 2> /dev/null || {
  echo "build_torch_ext: ninja is needed (torch.utils.cpp_extension.load)"
  exit 2
}
# (python/symmoe is below the repository root, so this is the installed package or the PYTHONPATH one)
echo "build_torch_ext: target package $pkg"
build=${SYMMOE_TORCH_EXT_BUILD:-$(mktemp -d /tmp/symmoe_torch_ext.XXXXXX)}
mkdir -p "$build"

timeout "${SYMMOE_TORCH_EXT_TIMEOUT:-300}" "$py" - "$src" "$build" "$pkg" <<'EOF'
import os, shutil, sys, sysconfig, time
import torch
from torch.utils.cpp_extension import load

src, build, pkg = sys.argv[1:4]
start = time.time()
try:
    load(name="_torch_ep", sources=[src], extra_include_paths=[os.path.abspath("python/src")],
         extra_cflags=["-O2", "-Wall"], build_directory=build, with_cuda=True, verbose=True)
except Exception as e:
    print(f"build_torch_ext: compile failed: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
built = os.path.join(build, "_torch_ep.so")
if not os.path.isfile(built):
    print(f"build_torch_ext: torch reported success but {built} is missing", file=sys.stderr)
    sys.exit(1)
dest = os.path.join(pkg, "_torch_ep" + sysconfig.get_config_var("EXT_SUFFIX"))
shutil.copyfile(built, dest)
print(f"build_torch_ext: built in {time.time() - start:.0f} s with torch {torch.__version__}: {dest}")
EOF

# A fresh process, as a user gets it: import, bind to symmoe._C, chosen for this torch.
"$py" - <<'EOF'
import sys
import torch
import symmoe
from symmoe import _ep_eager
impl = _ep_eager.implementation(torch)
status = _ep_eager.native_status()
if status != "loaded" or impl is not sys.modules.get("symmoe._torch_ep"):
    print(f"build_torch_ext: symmoe does not use the extension: {status}", file=sys.stderr)
    sys.exit(1)
print(f"build_torch_ext: symmoe._torch_ep loaded and chosen ({sys.modules['symmoe._torch_ep'].__file__})")
EOF
