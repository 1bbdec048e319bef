"""symmoe: expert-parallel MoE on Hopper, from Python.

CPU paths (numpy in, numpy out): numeric formats and block quantisation (`symmoe.formats`), the planner
(`symmoe.plan`), the golden model (`symmoe.reference`). GPU paths (tensors through DLPack, no copies):
`ElasticBuffer` (DeepEP-shaped dispatch/combine, `symmoe.ep`) over a `Communicator` built from a
torch.distributed group (`symmoe.distributed`); the DeepGEMM-shaped fused layer `fp8_mega_moe` with
`get_symm_buffer_for_mega_moe` and `transform_weights_for_mega_moe` (`symmoe.mega`).

Importing symmoe never imports torch and needs no GPU; torch is imported only by the calls that need it.
`symmoe.torch_ops` (imported on first use of the attribute) registers dispatch, combine and the fused layer as
torch.library custom ops for torch.compile.
"""
from ._version import __version__  # CMakeLists.txt's project(VERSION), written at configure time
from . import _nccl_preload

_nccl_preload.preload()  # before _C: one libnccl.so.2 for symmoe and torch (see _nccl_preload.py)
from . import _C  # noqa: E402
from ._C import Error, PeerTimeout, MoeShape, named_shape
from . import formats, reference
from .formats import (
    float_to_e4m3, e4m3_to_float, float_to_e5m2, e5m2_to_float, float_to_e2m1, e2m1_to_float, float_to_bf16,
    bf16_to_float, ue8m0_to_float, ue8m0_from_scale, scale_for_amax, quantize_activations,
    quantize_weights_128x128, quantize_weights_fp4,
)
from .planner import plan, Plans
from .dlpack import TensorInfo, tensor_info, DeviceView
from .ep import ElasticBuffer, EPHandle, EventOverlap, EventHandle
from .distributed import Communicator
from .mega import (SymmBuffer, get_symm_buffer_for_mega_moe, transform_weights_for_mega_moe, fp8_mega_moe,
                   fp8_fp4_mega_moe)

__all__ = [
    "__version__", "Error", "PeerTimeout", "MoeShape", "named_shape", "formats", "reference", "plan", "Plans",
    "TensorInfo", "tensor_info", "DeviceView", "ElasticBuffer", "EPHandle", "EventOverlap", "EventHandle",
    "Communicator",
    "SymmBuffer", "get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe", "fp8_mega_moe",
    "fp8_fp4_mega_moe",
    "float_to_e4m3", "e4m3_to_float", "float_to_e5m2", "e5m2_to_float", "float_to_e2m1", "e2m1_to_float",
    "float_to_bf16", "bf16_to_float", "ue8m0_to_float", "ue8m0_from_scale", "scale_for_amax",
    "quantize_activations", "quantize_weights_128x128", "quantize_weights_fp4",
]


def __getattr__(name):
    """DeepEP's `topk_idx_t` (the dtype of topk_idx: torch.int64) and `symmoe.torch_ops` (the torch.library ops);
    torch is imported only when one of them is asked for."""
    if name == "topk_idx_t":
        import torch
        return torch.int64
    if name == "torch_ops":
        import importlib
        return importlib.import_module(".torch_ops", __name__)
    raise AttributeError(f"module 'symmoe' has no attribute {name!r}")
