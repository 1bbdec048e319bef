"""FakeCuda: a DLPack producer claiming to be a CUDA tensor at a fake address (never dereferenced), for the
CPU tests of argument validation."""
from symmoe import _C
from symmoe.dlpack import KDL_CUDA


class FakeCuda:
    """A DLPack producer claiming to be a CUDA tensor (C-contiguous) at a fake, 256-byte aligned address."""
    _next = 0x7F0000000000

    def __init__(self, shape, dtype, device=0):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device
        FakeCuda._next += 1 << 20
        self.ptr = FakeCuda._next

    def __dlpack__(self, stream=None, **kwargs):
        assert stream != 0, "DLPack forbids stream 0"
        return _C.dlpack_make_capsule(self.ptr, list(self.shape), self.dtype, KDL_CUDA, self.device)

    def __dlpack_device__(self):
        return (KDL_CUDA, self.device)
