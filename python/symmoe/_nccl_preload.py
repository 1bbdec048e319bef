"""Makes symmoe._C and torch share ONE libnccl.so.2, whichever of them is imported first.

symmoe._C needs libnccl.so.2 (the runtime bootstraps NCCL). torch from pip loads the NCCL of its wheel
(nvidia-nccl-*, site-packages/nvidia/nccl/lib) by path. Were symmoe imported first, the loader would take the
system's libnccl.so.2 and torch's later load by path would add a second NCCL (or bind torch to an older one).
Loading the wheel's library first, globally, by path, makes the loader reuse it for _C's dependency and for torch.
Without that wheel nothing is done: the loader's search path decides (the system NCCL). torch is never imported.
"""
import ctypes
import importlib.util
import os


def wheel_nccl_path():
    """Path of the pip wheel's libnccl.so.2, or None."""
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "lib", "libnccl.so.2")
        if os.path.isfile(path):
            return path
    return None


def preload():
    path = wheel_nccl_path()
    if path is not None:
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass  # unusable wheel library: fall back to the loader's search path
    return path
