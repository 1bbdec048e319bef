"""The DLPack bridge on the CPU: reading producers and capsules, producing zero-copy views."""
import os
import subprocess
import sys

import numpy as np
import pytest

import symmoe
from symmoe import _C
from symmoe.dlpack import KDL_CPU, KDL_CUDA, DeviceView, tensor_info


def test_importing_symmoe_imports_no_framework(tmp_path):
    """A `torch` that fails on import is first on the path: importing symmoe must not touch it."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('symmoe imported torch')\n")
    code = "import sys, symmoe; assert 'torch' not in sys.modules; print('ok')"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_numpy_array_description():
    a = np.arange(24, dtype=np.int64).reshape(4, 6)
    info = tensor_info(a)
    assert info.data_ptr == a.ctypes.data and info.shape == (4, 6) and info.strides == (6, 1)
    assert info.dtype == "int64" and info.device == "cpu" and not info.is_cuda and info.is_contiguous()
    t = tensor_info(a[:, ::2])
    assert t.strides == (6, 2) and not t.is_contiguous()


def test_capsule_round_trip_with_fake_cuda_pointer():
    cap = _C.dlpack_make_capsule(0x7F0000001000, [3, 256], "bfloat16", KDL_CUDA, 1)
    info = tensor_info(cap)
    assert (info.data_ptr, info.shape, info.strides, info.dtype, info.device) == \
        (0x7F0000001000, (3, 256), (256, 1), "bfloat16", "cuda:1")


def test_device_view_is_zero_copy_and_keeps_its_owner_alive():
    owner = np.arange(12, dtype=np.float32)
    view = DeviceView(owner.ctypes.data, (3, 4), "float32", 0, owner=owner, device_type=KDL_CPU)
    got = np.from_dlpack(view)
    assert got.shape == (3, 4) and np.array_equal(got.ravel(), owner)
    owner[5] = -1.0  # same memory
    assert got[1, 1] == -1.0
    del owner, view
    assert got[1, 1] == -1.0  # the capsule's owner reference keeps the memory


def test_unknown_objects_and_dtypes_are_refused():
    with pytest.raises(TypeError, match="__dlpack__"):
        tensor_info([1, 2, 3])
    with pytest.raises(symmoe.Error, match="unknown dtype"):
        _C.dlpack_make_capsule(0, [1], "complex64", KDL_CPU, 0)
