"""Formats and block quantisation from Python, checked against independent numpy formulas."""
import numpy as np
import pytest

import symmoe
from symmoe import formats


def e4m3_decode_numpy(codes):
    """E4M3 (bias 7, 3 mantissa bits, subnormals, 0x7F/0xFF NaN) decoded with plain numpy arithmetic."""
    c = codes.astype(np.int64)
    sign = np.where(c & 0x80, -1.0, 1.0)
    exp, mant = (c >> 3) & 0xF, c & 0x7
    val = np.where(exp == 0, mant / 8.0 * 2.0 ** -6, (1 + mant / 8.0) * 2.0 ** (exp - 7))
    val = np.where((c & 0x7F) == 0x7F, np.nan, val)
    return (sign * val).astype(np.float32)


def test_e4m3_every_code_decodes_and_round_trips():
    codes = np.arange(256, dtype=np.uint8)
    got = symmoe.e4m3_to_float(codes)
    want = e4m3_decode_numpy(codes)
    finite = ~np.isnan(want)
    assert np.array_equal(np.isnan(got), ~finite)
    assert np.array_equal(got[finite], want[finite])
    # encode(decode(c)) == c for every finite code (the cast is RNE, so exact values map to themselves)
    assert np.array_equal(symmoe.float_to_e4m3(got[finite]), codes[finite])


def test_e4m3_rounds_to_nearest_even_and_saturates():
    x = np.array([1.0625, 1.1875, 449.0, 1e9, -1e9, 0.0], dtype=np.float32)  # ties between 1/1.125, 1.125/1.25
    got = symmoe.e4m3_to_float(symmoe.float_to_e4m3(x))
    assert got.tolist() == [1.0, 1.25, 448.0, 448.0, -448.0, 0.0]


def test_bf16_matches_numpy_rne():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(4096) * 10.0 ** rng.integers(-20, 20, 4096)).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    want = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    got = symmoe.float_to_bf16(x)
    assert got.dtype == np.uint16 and got.shape == x.shape
    assert np.array_equal(got, want)
    assert np.array_equal(symmoe.bf16_to_float(got), (want.astype(np.uint32) << 16).view(np.float32))


def test_casts_keep_shape():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    assert symmoe.float_to_e5m2(x).shape == (2, 3, 4)
    assert symmoe.float_to_e2m1(x).shape == (2, 3, 4)
    assert np.all(np.isin(symmoe.e2m1_to_float(np.arange(16, dtype=np.uint8)),
                          [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]))


@pytest.mark.parametrize("scale_format", ["fp32", "ue8m0"])
def test_quantize_activations_scales_and_error(scale_format):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 512)).astype(np.float32)
    codes, scales = symmoe.quantize_activations(x, 128, scale_format)
    assert codes.shape == (8, 512) and codes.dtype == np.uint8 and scales.shape == (8, 4)
    amax = np.abs(x).reshape(8, 4, 128).max(axis=2)
    if scale_format == "fp32":
        assert np.array_equal(scales, (amax / np.float32(448)).astype(np.float32))
    else:
        assert np.all(scales >= amax / 448) and np.all(scales < amax / 448 * 2)
        assert np.all(np.frexp(scales)[0] == 0.5)  # powers of two
    deq = formats.dequantize_activations(codes, scales)
    assert np.linalg.norm(deq - x) / np.linalg.norm(x) < 0.05


def test_quantize_weights_128x128_partial_blocks():
    rng = np.random.default_rng(6)
    w = rng.standard_normal((200, 300)).astype(np.float32)
    codes, scales = symmoe.quantize_weights_128x128(w)
    assert codes.shape == (200, 300) and scales.shape == (2, 3)
    assert scales[1, 2] == np.float32(np.abs(w[128:, 256:]).max() / np.float32(448))
    deq = formats.dequantize_weights_128x128(codes, scales)
    assert np.linalg.norm(deq - w) / np.linalg.norm(w) < 0.05


def test_quantize_weights_fp4_round_trip():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((4, 128)).astype(np.float32)
    packed, scales = symmoe.quantize_weights_fp4(w)
    assert packed.shape == (4, 64) and scales.shape == (4, 4)
    nibbles = formats.unpack_e2m1(packed)
    assert np.array_equal(nibbles[:, 0::2], packed & 0xF)
    deq = formats.dequantize_weights_fp4(packed, scales)
    # E2M1 has one mantissa bit: elementwise error up to half a step of the largest binade
    assert np.linalg.norm(deq - w) / np.linalg.norm(w) < 0.25
    assert np.all(np.abs(deq) <= 6 * formats.ue8m0_to_float(scales).repeat(32, axis=1))


def test_quantization_errors_carry_the_cpp_message():
    with pytest.raises(symmoe.Error, match="block") as e:
        symmoe.quantize_activations(np.zeros((2, 100), np.float32), 128)
    assert e.value.component and "(at " in str(e.value)
    with pytest.raises(symmoe.Error, match="32"):
        symmoe.quantize_weights_fp4(np.zeros((2, 40), np.float32))
    with pytest.raises(symmoe.Error, match="scale_format"):
        symmoe.quantize_activations(np.zeros((2, 128), np.float32), 128, "fp16")
