"""Numeric formats over numpy arrays: the same cast functions the kernels and the golden model use
(include/symmoe/formats.hpp), so results here are bitwise what the GPU produces.

Element casts take any shape and return the same shape:
  float_to_e4m3 / float_to_e5m2 (fp32 -> uint8 codes, RNE, saturating), e4m3_to_float / e5m2_to_float (exact),
  float_to_e2m1 (fp32 -> one E2M1 nibble per uint8), e2m1_to_float, float_to_bf16 (fp32 -> uint16 bits, RNE),
  bf16_to_float, ue8m0_to_float (exponent bytes -> powers of two), ue8m0_from_scale, scale_for_amax.
Block quantisation (2-D fp32 input):
  quantize_activations(x, block=128, scale_format="fp32") -> (codes uint8 [M, K], scales fp32 [M, K/block])
  quantize_weights_128x128(w, scale_format="fp32") -> (codes uint8 [N, K], scales fp32 [ceil(N/128), ceil(K/128)])
  quantize_weights_fp4(w) -> (packed uint8 [N, K/2], column 2j in the low nibble; UE8M0 scales uint8 [N, K/32])
Bad shapes or block sizes raise symmoe.Error with the C++ message. Inputs are converted, never reinterpreted: codes
and bit patterns must be integer arrays with values in range (a float array raises TypeError, 300 as an E4M3 code
ValueError), quantiser inputs must be finite (ValueError naming the row and block of the first Inf or NaN).
"""
import numpy as np

from ._C import (
    float_to_e4m3, e4m3_to_float, float_to_e5m2, e5m2_to_float, float_to_e2m1, e2m1_to_float, float_to_bf16,
    bf16_to_float, ue8m0_to_float, ue8m0_from_scale, scale_for_amax, quantize_activations,
    quantize_weights_128x128, quantize_weights_fp4, E4M3_MAX, E5M2_MAX, E2M1_MAX, AMAX_FLOOR,
)


def unpack_e2m1(packed):
    """Packed E2M1 bytes [N, K/2] -> nibbles uint8 [N, K] (column 2j from the low nibble)."""
    packed = np.asarray(packed)
    if packed.dtype != np.uint8:
        raise TypeError(f"packed must be packed E2M1 bytes of dtype uint8, got dtype {packed.dtype}")
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = packed & 0xF
    out[..., 1::2] = packed >> 4
    return out


def dequantize_activations(codes, scales):
    """E4M3 codes [M, K] and per-row-block scales [M, K/block] -> fp32 [M, K]."""
    codes = np.asarray(codes)
    block = codes.shape[1] // np.asarray(scales).shape[1]
    return e4m3_to_float(codes) * np.repeat(np.asarray(scales, dtype=np.float32), block, axis=1)


def dequantize_weights_128x128(codes, scales):
    """E4M3 codes [N, K] and 128x128 block scales -> fp32 [N, K]."""
    codes = np.asarray(codes)
    n, k = codes.shape
    s = np.repeat(np.repeat(np.asarray(scales, dtype=np.float32), 128, axis=0), 128, axis=1)[:n, :k]
    return e4m3_to_float(codes) * s


def dequantize_weights_fp4(packed, scales_ue8m0):
    """Packed E2M1 [N, K/2] and UE8M0 scales [N, K/32] -> fp32 [N, K]."""
    return e2m1_to_float(unpack_e2m1(packed)) * np.repeat(ue8m0_to_float(scales_ue8m0), 32, axis=1)


__all__ = [
    "float_to_e4m3", "e4m3_to_float", "float_to_e5m2", "e5m2_to_float", "float_to_e2m1", "e2m1_to_float",
    "float_to_bf16", "bf16_to_float", "ue8m0_to_float", "ue8m0_from_scale", "scale_for_amax",
    "quantize_activations", "quantize_weights_128x128", "quantize_weights_fp4", "unpack_e2m1",
    "dequantize_activations", "dequantize_weights_128x128", "dequantize_weights_fp4",
    "E4M3_MAX", "E5M2_MAX", "E2M1_MAX", "AMAX_FLOOR",
]
