"""FP4 weights for the fused layer: DeepGEMM's fp8_fp4_mega_moe weight pairs (recipe (1, 1, 32)) -> the layout of
include/symmoe/weight_transform_fp4.hpp, computed on the host.

Input, as DeepGEMM takes them: l1 = (w1 int8 or uint8 [E_local, 2I, H/2]: E2M1 two per byte, column 2j in the low
nibble, gate rows then up rows; w1_sf int32 or uint32 [E_local, 2I, H/128]: four UE8M0 codes per int32, byte j = the
scale of columns [128kb + 32j, +32) of one row), l2 = (w2 [E_local, H, I/2], w2_sf [E_local, H, I/128]) the same way.
numpy arrays or torch tensors on any device (DeepGEMM's CUDA tensors: copied to the host, transformed there, and the
results copied back to the weights' device). Bytes are taken as they are (int8 / int32 viewed as uint8 / uint32:
these are bit patterns, not numbers); any strides (DeepGEMM's MN-major scales included).
Output per layer, a triple (data, scale codes, base scales): l1 = (data [E_local, 2I, H/2] rows interleaved by 8 as
the FP8 L1 data, codes [E_local, H/128, 2I] MN-major with the rows interleaved the same way, base scales fp32
[E_local, I/128, H/128, 2]), l2 = (data [E_local, H, I/2] rows in place, codes [E_local, I/128, H] MN-major, base
scales fp32 [E_local, H/128, I/128]). Dtypes: numpy in -> data uint8, codes uint32; torch in -> data of the input's
dtype (int8 or uint8), codes int32 (DeepGEMM's dtype), on the input weights' device. Both data arrays are in symmoe's
internal bit layout: in every 32-bit word (8 elements) the magnitudes stay and the sign bits are permuted
(src/kernels/gemm/fp4_word_layout.hpp), so pass the returned arrays, never the input bytes. DeepGEMM returns pairs;
the third array (the per-128x128 base scale the E4M3 fold is relative to, include/symmoe/fp4_fold.hpp) is symmoe's
addition.
A 128x128 block whose scale codes span more than 14 binades (the fold would not be exact) or that holds the NaN
code 0xFF is refused (symmoe.Error naming the layer, expert, row and codes), before any output exists.
NOTES: the host round trip costs one copy of the FP4 bytes each way (once, at load time).
"""
from . import _C
from ._checks import check, is_torch


def _dtype_name(a):
    return str(a.dtype).split(".")[-1]


def _as_bits(a, name, dtypes):
    """The bytes of `a` as a numpy array of dtypes[-1] (torch tensors: a host copy)."""
    import numpy as np
    if is_torch(a):
        check(_dtype_name(a) in dtypes, TypeError, f"{name} must be {' or '.join(dtypes)}, got {_dtype_name(a)}")
        a = a.detach().cpu().numpy()
    check(isinstance(a, np.ndarray), TypeError, f"{name} must be a numpy array or a torch tensor, got "
                                                f"{type(a).__name__}")
    check(a.dtype.name in dtypes, TypeError, f"{name} must be {' or '.join(dtypes)}, got {a.dtype.name}")
    return a.view(dtypes[-1])


def _like_input(triple, weights):
    """A transformed triple in the kind of the input: numpy as it is; torch on the weights' device, data of the
    weights' dtype, codes int32."""
    if not is_torch(weights):
        return triple
    import numpy as np
    import torch
    data, codes, base = triple
    return (torch.from_numpy(data).to(weights.device).view(weights.dtype),
            torch.from_numpy(codes.view(np.int32)).to(weights.device),
            torch.from_numpy(base).to(weights.device))


def is_fp4_pair(pair):
    """True for a (weights, scales) pair whose scales are packed UE8M0 (DeepGEMM's FP4 signature)."""
    return (isinstance(pair, tuple) and len(pair) == 2 and hasattr(pair[1], "dtype")
            and _dtype_name(pair[1]) in ("int32", "uint32"))


def transform_fp4_weights(l1_weights, l2_weights):
    for name, pair in (("l1_weights", l1_weights), ("l2_weights", l2_weights)):
        check(is_fp4_pair(pair), TypeError,
              f"{name} must be an FP4 (weights, packed int32 scales) pair like the other layer's")
    w1 = _as_bits(l1_weights[0], "l1 weights", ("int8", "uint8"))
    s1 = _as_bits(l1_weights[1], "l1 scales", ("int32", "uint32"))
    w2 = _as_bits(l2_weights[0], "l2 weights", ("int8", "uint8"))
    s2 = _as_bits(l2_weights[1], "l2 scales", ("int32", "uint32"))
    check(w1.ndim == 3 and w1.shape[1] % 256 == 0 and w1.shape[2] % 64 == 0, ValueError,
          f"l1 weights must be [E_local, 2I, H/2] with I and H multiples of 128, got {list(w1.shape)}")
    E, two_i, H = w1.shape[0], w1.shape[1], 2 * w1.shape[2]
    I = two_i // 2
    check(s1.shape == (E, two_i, H // 128), ValueError,
          f"l1 scales must be [{E}, {two_i}, {H // 128}] (four UE8M0 per int32, one per row per 32 columns), got "
          f"{list(s1.shape)}")
    check(w2.shape == (E, H, I // 2), ValueError, f"l2 weights must be [{E}, {H}, {I // 2}], got {list(w2.shape)}")
    check(s2.shape == (E, H, I // 128), ValueError,
          f"l2 scales must be [{E}, {H}, {I // 128}] (four UE8M0 per int32), got {list(s2.shape)}")
    l2 = _C.transform_l2_weights_fp4(w2, s2)
    l1 = _C.transform_l1_weights_fp4(w1, s1)
    return _like_input(l1, l1_weights[0]), _like_input(l2, l2_weights[0])
