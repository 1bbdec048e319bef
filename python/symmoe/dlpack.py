"""DLPack bridge: read any tensor-like object without copying and without importing a framework.

tensor_info(obj) accepts an object with __dlpack__ / __dlpack_device__ (torch, cupy, jax, numpy >= 1.22) or a
'dltensor' capsule and returns a TensorInfo (data_ptr, shape, strides in elements, dtype name, device). For CUDA
producers the caller's stream is handed to __dlpack__(stream=...), so the producer orders its pending work before
that stream (the DLPack stream protocol); symmoe then launches on the same stream.

torch_tensor_info(t) reads the same description straight from a torch tensor (symmoe.ep uses it for torch inputs,
which it consumes on torch's current stream; ~10 us less per tensor than a capsule round trip).

DeviceView wraps device memory that symmoe owns (EpBuffer outputs, handle metadata) as a DLPack producer:
torch.from_dlpack(view) (or cupy.from_dlpack) gives a zero-copy tensor. If the input tensors were torch tensors,
symmoe.ep converts the views to torch tensors itself (as_framework_like).
"""
import sys
from dataclasses import dataclass

from . import _C

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
_DEVICE_NAMES = {KDL_CPU: "cpu", KDL_CUDA: "cuda", KDL_CUDA_HOST: "cuda_host", KDL_CUDA_MANAGED: "cuda_managed"}
ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4,
            "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8, "float8_e4m3fn": 1,
            "float8_e5m2": 1, "float8_e8m0fnu": 1}


@dataclass(frozen=True)
class TensorInfo:
    data_ptr: int
    shape: tuple
    strides: tuple  # in elements
    dtype: str      # "bfloat16", "float8_e4m3fn", "int64", ... (numpy-style names)
    device_type: int
    device_id: int

    @property
    def device(self):
        name = _DEVICE_NAMES.get(self.device_type, f"dlpack_device_{self.device_type}")
        return f"{name}:{self.device_id}" if self.device_type != KDL_CPU else "cpu"

    @property
    def is_cuda(self):
        return self.device_type == KDL_CUDA

    @property
    def itemsize(self):
        return ITEMSIZE.get(self.dtype, 0)

    @property
    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def is_contiguous(self):
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True


def _is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


def _is_torch_tensor(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _torch_exportable(obj):
    """torch float8 tensors travel as their uint8 bytes (DLPack float8 export is not in every torch); tensors that
    require grad are detached (torch refuses to export them; only the data pointer is read)."""
    import torch
    obj = obj.detach()
    if obj.dtype in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)):
        return obj.view(torch.uint8), str(obj.dtype).replace("torch.", "")
    return obj, None


_TORCH_DEVICE_TYPES = {"cpu": KDL_CPU, "cuda": KDL_CUDA}
_torch_dtype_names = {}


def torch_dtype_name(dtype):
    """A torch dtype's name as DLPack and symmoe spell it ("float8_e4m3fn", "bfloat16", ...), cached per dtype."""
    name = _torch_dtype_names.get(dtype)
    if name is None:
        name = _torch_dtype_names.setdefault(dtype, str(dtype).replace("torch.", ""))
    return name


def torch_tensor_info(t):
    """TensorInfo read straight from a torch tensor: what its DLPack export says (float8 keeps its name), without
    building and parsing a capsule (~10 us less per tensor). For consumers that launch on torch's current stream,
    where DLPack's stream handshake has nothing to order."""
    name = torch_dtype_name(t.dtype)
    dev = t.device
    return TensorInfo(t.data_ptr(), tuple(t.shape), tuple(t.stride()), name, _TORCH_DEVICE_TYPES.get(dev.type, -1),
                      dev.index if dev.index is not None else 0)


def tensor_info(obj, stream=None):
    """Describe `obj` (DLPack producer or capsule). stream: the CUDA stream (int handle) the consumer will use."""
    if _is_capsule(obj):
        return TensorInfo(*_C.dlpack_describe(obj))
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise TypeError(f"expected a tensor with __dlpack__/__dlpack_device__ (torch, cupy, numpy) or a DLPack "
                        f"capsule, got {type(obj).__name__}")
    dtype_override = None
    if _is_torch_tensor(obj):
        obj, dtype_override = _torch_exportable(obj)
    device_type, _ = obj.__dlpack_device__()
    if int(device_type) == KDL_CUDA and stream is not None:
        # DLPack: 1 = the legacy default stream; 0 is not allowed.
        capsule = obj.__dlpack__(stream=stream if stream != 0 else 1)
    else:
        capsule = obj.__dlpack__()
    info = TensorInfo(*_C.dlpack_describe(capsule))
    if dtype_override is not None:
        info = TensorInfo(info.data_ptr, info.shape, info.strides, dtype_override, info.device_type, info.device_id)
    return info


class DeviceView:
    """Zero-copy DLPack producer over memory owned by `owner` (kept alive while any consumer holds the tensor).
    C-contiguous unless `strides` (in elements) are given; device memory of CUDA device `device_id` (or host memory
    with device_type=KDL_CPU)."""

    def __init__(self, data_ptr, shape, dtype, device_id, owner=None, device_type=KDL_CUDA, strides=None):
        if dtype not in ITEMSIZE:
            raise ValueError(f"unknown dtype {dtype!r}")
        self.data_ptr, self.shape, self.dtype = int(data_ptr), tuple(int(d) for d in shape), dtype
        self.device_type, self.device_id, self.owner = device_type, int(device_id), owner
        self.strides = None if strides is None else tuple(int(s) for s in strides)
        if self.strides is not None and len(self.strides) != len(self.shape):
            raise ValueError(f"{len(self.strides)} strides for shape {list(self.shape)}")

    def __dlpack__(self, stream=None, **kwargs):  # max_version, dl_device, copy: legacy capsule, no copy
        if kwargs.get("copy"):
            raise BufferError("symmoe DeviceView does not copy")
        return _C.dlpack_make_capsule(self.data_ptr, list(self.shape), self.dtype, self.device_type,
                                      self.device_id, self.owner, list(self.strides or ()))

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __repr__(self):
        return f"DeviceView({self.dtype}{list(self.shape)} at 0x{self.data_ptr:x} on device {self.device_id})"


def as_framework_like(view, like):
    """torch tensor (zero-copy) if `like` is a torch tensor, else the DeviceView. A float8 `like` views the bytes
    back as its dtype."""
    if view is None or not _is_torch_tensor(like):
        return view
    import torch
    t = torch.from_dlpack(view)
    if like.dtype != t.dtype and like.element_size() == t.element_size() and view.dtype == "uint8":
        t = t.view(like.dtype)
    return t
