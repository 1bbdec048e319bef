"""A stand-in for the few torch APIs symmoe.ep and symmoe.torch_ops use (tensors, streams, events, allocation,
torch.library.custom_op), for CPU tests of their torch paths: outputs allocated per call, streams and events of the
communication stream, custom ops as plain calls with their fake implementations kept aside. Nothing is computed:
tensors are shapes, dtypes and fake addresses; streams and events record what was asked of them."""
import contextlib
import types


class dtype:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return f"torch.{self.name}"


bfloat16, float32, int32, int64 = dtype("bfloat16", 2), dtype("float32", 4), dtype("int32", 4), dtype("int64", 8)
uint8, float8_e4m3fn = dtype("uint8", 1), dtype("float8_e4m3fn", 1)
_DTYPES = {d.name: d for d in (bfloat16, float32, int32, int64, uint8, float8_e4m3fn)}


class device:
    def __init__(self, index):
        self.type, self.index = "cuda", index


class Tensor:
    _next_address = 0x7E0000000000

    def __init__(self, shape, dtype, strides=None, address=None, device_index=0):
        self.shape, self.dtype, self._device = tuple(shape), dtype, device_index
        contiguous, n = [], 1
        for d in reversed(self.shape):
            contiguous.insert(0, n)
            n *= d
        self._strides = tuple(strides) if strides is not None else tuple(contiguous)
        self.numel = n
        if address is None:
            Tensor._next_address += 1 << 24
            address = Tensor._next_address
        self._address = address
        self.recorded_streams, self.ops = [], []

    is_cuda = True

    @property
    def device(self):
        return device(self._device)

    def get_device(self):
        return self._device

    def data_ptr(self):
        return self._address if self.numel else 0

    def stride(self):
        return self._strides

    def element_size(self):
        return self.dtype.itemsize

    def is_contiguous(self):
        return self._strides == Tensor(self.shape, self.dtype, address=1)._strides

    def record_stream(self, stream):
        self.recorded_streams.append(stream)

    def copy_(self, src):
        self.ops.append(("copy_", src, _current[0]))
        return self

    def add_(self, other):
        self.ops.append(("add_", other, _current[0]))
        return self

    def __getitem__(self, rows):
        assert isinstance(rows, slice) and rows.start is None and rows.step is None
        return Tensor((rows.stop,) + self.shape[1:], self.dtype, self._strides, self._address, self._device)

    def view(self, dtype):
        assert dtype.itemsize == self.dtype.itemsize
        return Tensor(self.shape, dtype, self._strides, self._address, self._device)

    def new_empty(self, shape, dtype=None):
        return Tensor(shape, dtype or self.dtype, device_index=self._device)


class Stream:
    _next_handle = 0x5000

    def __init__(self, device=0, handle=None):
        if handle is None:
            Stream._next_handle += 0x100
            handle = Stream._next_handle
        self.cuda_stream, self.waited = handle, []

    def wait_event(self, event):
        self.waited.append(event)

    def __eq__(self, other):
        return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream

    def __hash__(self):
        return hash(self.cuda_stream)


class Event:
    def __init__(self):
        self.recorded_on = None

    def record(self, stream=None):
        self.recorded_on = stream if stream is not None else _current[0]


_default = Stream(handle=0)  # torch's default stream: raw handle 0 (symmoe passes cudaStreamLegacy)
_current = [_default]
_capturing = [False]
set_stream_calls = []


def _set_stream(stream):
    set_stream_calls.append(stream)
    _current[0] = stream


@contextlib.contextmanager
def _stream_context(stream):
    saved = _current[0]
    _current[0] = stream
    try:
        yield
    finally:
        _current[0] = saved


def _allocation(shape, dtype=None, device=None, strides=None):
    t = Tensor(shape if isinstance(shape, tuple) else (shape,), dtype or bfloat16, strides)
    t.allocated_on = _current[0]
    return t


def empty(shape, dtype=None, device=None):
    return _allocation(shape, dtype, device)


def empty_strided(shape, strides, dtype=None, device=None):
    return _allocation(shape, dtype, device, strides)


def zeros(*shape, dtype=None, device=None):
    return _allocation(shape, dtype, device)


def from_dlpack(view):
    return Tensor(view.shape, _DTYPES[view.dtype], address=view.data_ptr)


cuda = types.SimpleNamespace(
    Stream=Stream, Event=Event, current_stream=lambda device=None: _current[0], set_stream=_set_stream,
    stream=_stream_context, is_available=lambda: True, is_current_stream_capturing=lambda: _capturing[0],
    is_initialized=lambda: True, synchronize=lambda device=None: None, default_stream=lambda device=None: _default)
_C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: _current[0].cuda_stream)


class CustomOp:
    """What torch.library.custom_op returns here: the function, callable, and its fake implementation."""

    def __init__(self, name, fn, mutates_args):
        self.name, self.fn, self.mutates_args, self.fake = name, fn, mutates_args, None

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def register_fake(self, fn):
        self.fake = fn
        return fn


custom_ops = {}  # name ("symmoe::mega_moe") -> CustomOp, every op defined while this module stood in for torch


def _custom_op(name, mutates_args):
    def define(fn):
        op = custom_ops[name] = CustomOp(name, fn, mutates_args)
        return op
    return define


library = types.SimpleNamespace(custom_op=_custom_op)


def reset():
    """Fresh state for one test: the default stream current, nothing recorded."""
    _current[0] = _default
    _capturing[0] = False
    set_stream_calls.clear()
    _default.waited.clear()


def install(monkeypatch):
    """This module as `torch` for one test: fresh state (reset), sys.modules["torch"] patched, and symmoe's cache of
    torch's raw-stream getter emptied so that it is looked up again here (symmoe._checks.raw_stream_getter)."""
    import sys

    from symmoe import _checks

    reset()
    monkeypatch.setitem(sys.modules, "torch", sys.modules[__name__])
    monkeypatch.setattr(_checks, "_raw_stream", [])
