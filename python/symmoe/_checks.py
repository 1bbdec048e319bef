"""Argument checks and the caller's stream, shared by symmoe.ep and symmoe.mega (no GPU work before they pass).

NOTES: hot path (every tensor of every call): torch tensors are read directly (no DLPack capsule) and messages are
formatted only on failure.
"""
import sys

from .dlpack import KDL_CUDA, tensor_info, torch_dtype_name, torch_tensor_info

CUDA_STREAM_LEGACY = 1  # cudaStreamLegacy


def check(cond, exc, msg):
    if not cond:
        raise exc(msg)


def check_int(name, value, low=1):
    check(isinstance(value, int) and not isinstance(value, bool), TypeError,
          f"{name} must be an int, got {type(value).__name__}")
    check(value >= low, ValueError, f"{name} must be >= {low}, got {value}")


def is_torch(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _torch_fast(t, device, dtypes, shape):
    """(data_ptr, shape) of a torch tensor that passes every check of device_tensor, else None. A handful of C
    calls: no TensorInfo, no torch.device object, no message."""
    if not t.is_cuda or t.get_device() != device or torch_dtype_name(t.dtype) not in dtypes:
        return None
    s = t.shape
    if len(s) != len(shape):
        return None
    for want, got in zip(shape, s):
        if want is not None and want != got:
            return None
    if not t.is_contiguous():
        return None
    return t.data_ptr(), s


def device_tensor(obj, name, device, stream, dtypes, shape):
    """(data_ptr, shape) of a contiguous CUDA tensor on `device` with one of `dtypes` and `shape` (None = any
    extent); ValueError / TypeError naming `name`, expected and got otherwise."""
    if is_torch(obj):
        fast = _torch_fast(obj, device, dtypes, shape)
        if fast is not None:
            return fast
        info = torch_tensor_info(obj)  # the slow path only words the error
    else:
        try:
            info = tensor_info(obj, stream)
        except TypeError as e:
            raise TypeError(f"{name}: {e}") from None
    if info.device_type != KDL_CUDA or info.device_id != device:
        raise ValueError(f"{name} must be on cuda:{device} (this rank's GPU), got {info.device}")
    if info.dtype not in dtypes:
        raise TypeError(f"{name} must have dtype {' or '.join(dtypes)}, got {info.dtype}")
    if len(info.shape) != len(shape) or any(e is not None and e != g for e, g in zip(shape, info.shape)):
        raise ValueError(f"{name} must have shape {list('*' if e is None else e for e in shape)}, "
                         f"got {list(info.shape)}")
    if not info.is_contiguous():
        raise ValueError(f"{name} must be contiguous (row-major), got strides {list(info.strides)} for shape "
                         f"{list(info.shape)}")
    return info.data_ptr, info.shape


_raw_stream = []  # [getter(device) -> cudaStream_t int] once found (raw_stream_getter)


def raw_stream_getter(torch):
    """torch's current-stream getter as a raw handle, device -> int (found once, then cached in _raw_stream)."""
    if not _raw_stream:
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _raw_stream.append(raw or (lambda d: torch.cuda.current_stream(d).cuda_stream))
    return _raw_stream[0]


def caller_stream(like, device, fallback):
    """The cudaStream_t (int) to launch on: torch's current stream of `device` when `like` is a torch CUDA tensor,
    else `fallback` (the communicator's stream). torch's default stream is the legacy default stream (handle 0); it
    is passed as cudaStreamLegacy (1), because 0 tells the C++ side to use the communicator's own stream, which
    does not wait for work on the legacy stream.
    NOTES: reads the raw handle (torch._C._cuda_getCurrentRawStream, ~0.3 us) instead of building a
    torch.cuda.Stream object (~5 us); torch_stream() builds one when an event must be recorded."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor) and like.is_cuda:
        return raw_stream_getter(torch)(device) or CUDA_STREAM_LEGACY
    return fallback


def torch_stream(like, device):
    """torch.cuda.current_stream(device) when `like` is a torch CUDA tensor, else None."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor) and like.is_cuda:
        return torch.cuda.current_stream(device)
    return None
