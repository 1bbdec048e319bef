"""symmoe._torch_ep on the CPU: python/src/torch_ext/torch_ep.cpp compiled with the fake libtorch of
torch_stub/fake_libtorch.cpp (NOT torch) and run by torch_ext_fake_run.py in its own process, against the Python
fast path. What the GPU tests check with real tensors (python/tests_gpu/test_ep_torch_ext.py), here for the
extension's own logic: its C entry points (ElasticBuffer.dispatch / combine), fast path, records and handle pool.
Skipped where no C++ compiler or headers (Python, pybind11, CUDA runtime) are found."""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _includes():
    dirs = [sysconfig.get_paths()["include"]]
    try:
        import pybind11
        dirs.append(pybind11.get_include())
    except ImportError:
        dirs.append("/usr/include")
    dirs += [d for d in ("/usr/local/cuda/include", "/usr/include") if os.path.isdir(d)]
    need = {"Python.h": False, "pybind11/pybind11.h": False, "cuda_runtime_api.h": False}
    for name in need:
        need[name] = any(os.path.isfile(os.path.join(d, name)) for d in dirs)
    return dirs, [n for n, found in need.items() if not found]


@pytest.fixture(scope="module")
def fake_extension(tmp_path_factory):
    cxx = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    dirs, missing = _includes()
    if not cxx or missing:
        pytest.skip(f"no C++ compiler or headers ({missing or 'c++'})")
    out = tmp_path_factory.mktemp("torch_ext") / ("_torch_ep" + sysconfig.get_config_var("EXT_SUFFIX"))
    stub = ROOT / "python" / "tests" / "torch_stub"
    cmd = [cxx, "-std=c++17", "-O0", "-shared", "-fPIC", "-w", "-DTORCH_EXTENSION_NAME=_torch_ep",
           f"-I{stub / 'include'}", f"-I{ROOT / 'python' / 'src'}"] + [f"-I{d}" for d in dirs] + [
           str(ROOT / "python" / "src" / "torch_ext" / "torch_ep.cpp"), str(stub / "fake_libtorch.cpp"), "-o", str(out)]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=110)
    assert build.returncode == 0, build.stderr[-3000:]
    return out


def test_extension_paths_equal_the_python_path(fake_extension):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    script = ROOT / "python" / "tests" / "torch_ext_fake_run.py"
    run = subprocess.run([sys.executable, str(script), str(fake_extension)], capture_output=True, text=True, timeout=60,
                         env=env)
    assert run.returncode == 0 and "torch_ext_fake_run: ok" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
