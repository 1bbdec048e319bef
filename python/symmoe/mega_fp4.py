"""FP4 weights for the fused layer: DeepGEMM's fp8_fp4_mega_moe weight pairs (recipe (1, 1, 32)) -> the layout of
include/symmoe/weight_transform_fp4.hpp, on the host (numpy).

Input, as DeepGEMM takes them: l1 = (w1 int8 or uint8 [E_local, 2I, H/2]: E2M1 two per byte, column 2j in the low
nibble, gate rows then up rows; w1_sf int32 or uint32 [E_local, 2I, H/128]: four UE8M0 codes per int32, byte j = the
scale of columns [128kb + 32j, +32) of one row), l2 = (w2 [E_local, H, I/2], w2_sf [E_local, H, I/128]) the same way.
Bytes are taken as they are (int8 / int32 viewed as uint8 / uint32: these are bit patterns, not numbers); any
strides (DeepGEMM's MN-major scales included).
Output: l1 = (data uint8 [E_local, 2I, H/2] rows interleaved by 8 as the FP8 L1 data, scales uint32
[E_local, H/128, 2I] MN-major with the rows interleaved the same way, base scales fp32 [E_local, I/128, H/128, 2]),
l2 = (data uint8 [E_local, H, I/2] rows in place, scales uint32 [E_local, I/128, H] MN-major, base scales fp32
[E_local, H/128, I/128]). Both data arrays are in symmoe's internal bit layout: in every 32-bit word (8 elements) the
magnitudes stay and the sign bits are permuted (src/kernels/gemm/fp4_word_layout.hpp), so pass the returned arrays,
never the input bytes. DeepGEMM returns pairs; the third array (the per-128x128
base scale the E4M3 fold is relative to, include/symmoe/fp4_fold.hpp) is symmoe's addition.
A 128x128 block whose scale codes span more than 14 binades (the fold would not be exact) or that holds the NaN
code 0xFF is refused (symmoe.Error naming the layer, expert, row and codes), before any output exists.
"""
from . import _C
from ._checks import check, is_torch


def _as_bits(a, name, dtypes):
    import numpy as np
    check(not is_torch(a), TypeError,
          f"{name}: FP4 weights are transformed on the host: pass numpy arrays (tensor.cpu().numpy()), got a tensor")
    check(isinstance(a, np.ndarray), TypeError, f"{name} must be a numpy array, got {type(a).__name__}")
    check(a.dtype.name in dtypes, TypeError, f"{name} must be {' or '.join(dtypes)}, got {a.dtype.name}")
    return a.view(dtypes[-1])


def is_fp4_pair(pair):
    """True for a (weights, scales) pair whose scales are packed UE8M0 (DeepGEMM's FP4 signature)."""
    return (isinstance(pair, tuple) and len(pair) == 2 and hasattr(pair[1], "dtype")
            and str(pair[1].dtype).split(".")[-1] in ("int32", "uint32"))


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
    return l1, l2
