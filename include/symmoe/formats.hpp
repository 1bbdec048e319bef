// Numeric formats: FP8 E4M3 / E5M2, FP4 E2M1, UE8M0 scales, BF16, and the per-block scale rule.
//
// Contract: these functions are the ONE definition of every cast in symmoe. Kernels, host quantisers and the golden
// model all call them, so host and device results are bitwise identical. Plain integer/bit arithmetic only (no CUDA
// headers, no log2f/ldexpf, no hardware cvt), compiled by g++ for symmoe_core and by nvcc for kernels.
//
// Encodings (sign bit is the top bit of each code):
//   E4M3  bias 7,  max 448   (0x7E), 0x7F/0xFF = NaN, no inf, subnormals k * 2^-9.
//   E5M2  bias 15, max 57344 (0x7B), 0x7C = inf, 0x7D..0x7F = NaN, subnormals k * 2^-16.
//   E2M1  bias 1,  max 6     (0x7), values 0, 0.5, 1, 1.5, 2, 3, 4, 6; one nibble; packed two per byte with column
//         2j in the low nibble (see quant.hpp).
//   UE8M0 exponent only: value 2^(e-127); e = 0 is 2^-127 (an fp32 subnormal), e = 0xFF is NaN.
//   BF16  the top 16 bits of an fp32.
// Float -> narrow casts round to nearest, ties to even, and saturate (the CUDA __NV_SATFINITE behaviour):
//   a value that rounds beyond the largest finite code, and +-inf, give +-max. NaN input gives the code that
//   CUDA 13's HOST conversions produce (verified bitwise in tests/cpu/test_formats.cpp): E4M3 0x7F, E5M2 0x7F,
//   E2M1 0x7 (+6: E2M1 has no NaN), BF16 0x7FFF — always with the sign cleared. Zero keeps its sign; a value that
//   rounds to zero keeps its sign (-tiny -> -0).
// NOTES: all four float -> narrow casts agree with CUDA 13.0's host conversions on all 2^32 fp32 inputs (one
//        exhaustive run, g++ 12: docs/notes/formats.md). The unit tests sample that space (tests/cpu/test_formats.cpp).
// NOTES: float -> bf16 does not saturate (RNE may round a huge finite value up to inf), as __float2bfloat16_rn.
// NOTES: decoding a NaN code of E4M3, E5M2 or UE8M0 returns the fp32 NaN 0x7FFFFFFF (the bits CUDA's host
//        fp8 -> half -> float path returns); BF16 decode is the exact 16-bit shift (NaN payload kept).
// NOTES: on sm_90 the hardware cvt.rn.satfinite.{e4m3,e5m2}x2.f32 and cvt.rn.bf16.f32 are meant to agree with these
//        casts on every non-NaN input (checked over all 2^32 floats by tests/gpu/test_formats.cu); kernels still
//        call these functions so host and device stay one definition.
// NOTES: kernels calling these must keep IEEE fp32 division (nvcc's default -prec-div=true, no -use_fast_math):
//        the kFp32 scale rule and quantize_e4m3 depend on one correctly rounded division.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "symmoe/common.hpp"

namespace symmoe::fmt {

// ---- constants ----
inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;
inline constexpr float kE2M1Max = 6.0f;
// amax floor of the scale rule: an all-zero (or tiny) block still gets a finite, positive scale, so dequantisation
// never divides by zero and a zero block quantises to zeros. 1e-4 is far below the amax of any real activation or
// weight block (bf16 activations of a trained model sit at 1e-2..1e2) yet high enough that kFp32 scales
// (1e-4 / 448 ~ 2.2e-7) and UE8M0 scales (2^-22 for E4M3, 2^-15 for E2M1) stay normal fp32 numbers.
inline constexpr float kAmaxFloor = 1e-4f;
inline constexpr uint8_t kE4M3NanCode = 0x7F;
inline constexpr uint8_t kUe8m0NanCode = 0xFF;

// How a block scale is stored: a plain fp32 value (amax / fmt_max) or a power of two (UE8M0-representable).
enum class ScaleFormat { kFp32, kUe8m0 };
inline std::string to_string(ScaleFormat f) { return f == ScaleFormat::kFp32 ? "fp32" : "ue8m0"; }

// ---- bit casts ----
SYMMOE_HD uint32_t float_as_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}
SYMMOE_HD float bits_as_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}
inline constexpr uint32_t kCanonicalNanBits = 0x7FFFFFFFu;

// 2^e as an fp32 for e in [-149, 127] (exact, including subnormals); clamps to 0 / 2^127 outside.
SYMMOE_HD float pow2(int e) {
  if (e > 127) e = 127;
  if (e >= -126) return bits_as_float(uint32_t(e + 127) << 23);
  if (e < -149) return 0.0f;
  return bits_as_float(1u << (e + 149));
}

namespace detail {
// Float -> minifloat with kMantBits mantissa bits and exponent bias kBias, RNE, saturating to kMaxCode (the largest
// finite magnitude code). Works on the fp32 bits: the value is m * 2^(E-23) with a 24-bit significand m; it is
// rounded once to an integer count of the target's quantum 2^q, q = max(E, emin) - kMantBits; the code is then
// ((max(E, emin) + kBias - 1) << kMantBits) + units, which also handles the carry into the next binade and the
// subnormal -> normal step. Result: sign bit at kSignShift | magnitude code.
template <int kMantBits, int kBias, uint32_t kMaxCode, uint32_t kNanCode, int kSignShift>
SYMMOE_HD uint8_t encode_minifloat(float x) {
  const uint32_t bits = float_as_bits(x);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return uint8_t(kNanCode);  // NaN: sign cleared, as CUDA's host conversion
  const uint32_t sign = (bits >> 31) << kSignShift;
  const int biased = int(abs_bits >> 23);
  // fp32 subnormals: exponent -126 without the implicit bit (all of them round to zero in these formats).
  const int exp = biased == 0 ? -126 : biased - 127;
  const uint32_t mant = (abs_bits & 0x7FFFFFu) | (biased == 0 ? 0u : 0x800000u);
  constexpr int kMinExp = 1 - kBias;
  const int scale_exp = exp > kMinExp ? exp : kMinExp;
  int shift = 23 + scale_exp - exp - kMantBits;  // >= 23 - kMantBits > 0
  if (shift > 31) shift = 31;                    // m < 2^24, so any shift >= 25 already gives 0 units, no tie
  uint32_t units = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (units & 1u))) ++units;
  if (units == 0) return uint8_t(sign);
  // exp <= 128 (inf has exp 128), so this stays well inside int range.
  const int code = ((scale_exp + kBias - 1) << kMantBits) + int(units);
  const uint32_t magnitude = code > int(kMaxCode) ? kMaxCode : uint32_t(code);
  return uint8_t(sign | magnitude);
}

// Minifloat magnitude code (no sign, no NaN/inf) -> exact fp32 value.
template <int kMantBits, int kBias>
SYMMOE_HD float decode_minifloat_magnitude(uint32_t code) {
  const uint32_t exp_field = code >> kMantBits;
  const uint32_t mant = code & ((1u << kMantBits) - 1u);
  if (exp_field == 0) return float(mant) * pow2(1 - kBias - kMantBits);  // exact: small integer times 2^k
  return bits_as_float(((exp_field - kBias + 127) << 23) | (mant << (23 - kMantBits)));
}
}  // namespace detail

// ---- FP8 E4M3 ----
SYMMOE_HD uint8_t float_to_e4m3(float x) { return detail::encode_minifloat<3, 7, 0x7E, kE4M3NanCode, 7>(x); }
SYMMOE_HD float e4m3_to_float(uint8_t code) {
  if ((code & 0x7F) == 0x7F) return bits_as_float(kCanonicalNanBits);
  const float m = detail::decode_minifloat_magnitude<3, 7>(code & 0x7F);
  return (code & 0x80) ? -m : m;
}

// ---- FP8 E5M2 ----
SYMMOE_HD uint8_t float_to_e5m2(float x) { return detail::encode_minifloat<2, 15, 0x7B, 0x7F, 7>(x); }
SYMMOE_HD float e5m2_to_float(uint8_t code) {
  const uint32_t mag = code & 0x7F;
  if (mag > 0x7C) return bits_as_float(kCanonicalNanBits);
  const float m = mag == 0x7C ? bits_as_float(0x7F800000u) : detail::decode_minifloat_magnitude<2, 15>(mag);
  return (code & 0x80) ? -m : m;
}

// ---- FP4 E2M1 (one nibble in the low 4 bits) ----
SYMMOE_HD uint8_t float_to_e2m1(float x) { return detail::encode_minifloat<1, 1, 0x7, 0x7, 3>(x); }
SYMMOE_HD float e2m1_to_float(uint8_t nibble) {
  const float m = detail::decode_minifloat_magnitude<1, 1>(nibble & 0x7);
  return (nibble & 0x8) ? -m : m;
}
// Two nibbles per byte: column 2j low, 2j+1 high.
SYMMOE_HD uint8_t pack_e2m1x2(uint8_t lo, uint8_t hi) { return uint8_t((lo & 0xF) | ((hi & 0xF) << 4)); }

// ---- BF16 ----
SYMMOE_HD uint16_t float_to_bf16(float x) {
  const uint32_t bits = float_as_bits(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);  // RNE; may carry into inf, like CUDA
}
SYMMOE_HD float bf16_to_float(uint16_t b) { return bits_as_float(uint32_t(b) << 16); }

// ---- UE8M0 ----
SYMMOE_HD float ue8m0_to_float(uint8_t e) {
  if (e == kUe8m0NanCode) return bits_as_float(kCanonicalNanBits);
  return e == 0 ? bits_as_float(0x00400000u) : bits_as_float(uint32_t(e) << 23);
}
// Precondition: pow2_scale is a power of two in [2^-127, 2^127] (what scale_for_amax(..., kUe8m0) returns).
SYMMOE_HD uint8_t ue8m0_from_scale(float pow2_scale) {
  const uint32_t bits = float_as_bits(pow2_scale);
  return bits == 0x00400000u ? uint8_t(0) : uint8_t((bits >> 23) & 0xFF);
}
// True when s is a positive power of two that UE8M0 can hold (used by host argument checks and tests).
SYMMOE_HD bool is_ue8m0_scale(float s) {
  const uint32_t bits = float_as_bits(s);
  return bits == 0x00400000u || ((bits & 0x807FFFFFu) == 0 && (bits >> 23) != 0 && (bits >> 23) != 0xFF);
}

// ---- the block scale rule (docs/design.md §3.2) ----
// Smallest power of two >= r for a positive finite fp32 r, read off the bits: 2^e if the mantissa is zero, else
// 2^(e+1). NOTES: r >= kAmaxFloor / fmt_max is a normal number for every fmt_max <= 2^100, so the subnormal branch
// (which answers the smallest normal, 2^-126) is never taken by scale_for_amax; result clamps at 2^127.
SYMMOE_HD float ceil_pow2(float r) {
  const uint32_t bits = float_as_bits(r);
  uint32_t e = bits >> 23;  // r > 0, so no sign bit
  if (e == 0) return bits_as_float(1u << 23);
  if (bits & 0x7FFFFFu) ++e;
  if (e > 254) e = 254;
  return bits_as_float(e << 23);
}

// Amax floored at kAmaxFloor (also replaces a NaN amax) and capped at FLT_MAX (an inf amax): the scale is always
// finite and positive. kFp32: amax / fmt_max (one correctly rounded division). kUe8m0: 2^ceil(log2(amax /
// fmt_max)), computed as ceil_pow2 of that same division, so |x| <= amax maps to |x / scale| <= fmt_max.
SYMMOE_HD float scale_for_amax(float amax, float fmt_max, ScaleFormat format) {
  float a = amax > kAmaxFloor ? amax : kAmaxFloor;
  if (a > 3.40282347e38f) a = 3.40282347e38f;
  const float r = a / fmt_max;
  return format == ScaleFormat::kFp32 ? r : ceil_pow2(r);
}

// Running amax over |x|; NaN elements are skipped (they still encode as NaN codes).
SYMMOE_HD float amax_update(float amax, float x) {
  const float a = bits_as_float(float_as_bits(x) & 0x7FFFFFFFu);
  return a > amax ? a : amax;
}

// Quantise one value with its block scale. kFp32: x / s. kUe8m0: x * (1 / s), where 1 / s is exact (s is a power
// of two) and x * 2^-k equals the correctly rounded x / 2^k, so both forms give the same bits; kernels hoist the
// reciprocal and use quantize_e4m3_pow2 directly.
SYMMOE_HD uint8_t quantize_e4m3_pow2(float x, float inv_pow2_scale) { return float_to_e4m3(x * inv_pow2_scale); }
SYMMOE_HD uint8_t quantize_e4m3(float x, float scale, ScaleFormat format) {
  return format == ScaleFormat::kFp32 ? float_to_e4m3(x / scale) : quantize_e4m3_pow2(x, 1.0f / scale);
}
// E2M1 with a UE8M0 scale (the only FP4 scale format).
SYMMOE_HD uint8_t quantize_e2m1_pow2(float x, float inv_pow2_scale) { return float_to_e2m1(x * inv_pow2_scale); }

// ---- FP4 -> FP8 upconversion with the per-32 scale folded in (Hopper has no FP4 MMA, docs/design.md §3.5) ----
// Writes e4m3(e2m1(nibble) * 2^exponent_shift) to *out and returns whether that is exact.
// NOTES: every nibble folds exactly iff exponent_shift is in [kFoldExactMinShift, kFoldExactMaxShift]:
//   below, 0.5 * 2^s falls under E4M3's smallest subnormal 2^-9; above, 6 * 2^s exceeds 448 (saturates).
//   tests/cpu/test_formats.cpp enumerates all nibbles x shifts and checks this range against CUDA's conversion.
//   Use: per 128-wide K block with per-32 exponents k0..k3, fold 2^(k_i - k_ref) into the E4M3 values with
//   k_ref = max(k_i) - kFoldExactMaxShift and put 2^k_ref into the fp32 per-128 scale; exact iff
//   max(k_i) - min(k_i) <= kFoldExactMaxShift - kFoldExactMinShift (= 14).
inline constexpr int kFoldExactMinShift = -8;
inline constexpr int kFoldExactMaxShift = 6;
SYMMOE_HD bool e2m1_times_pow2_to_e4m3(uint8_t nibble, int exponent_shift, uint8_t* out) {
  const float v = e2m1_to_float(nibble);
  // Clamp the shift to where 2^s and v * 2^s are exact fp32 values (|v| <= 6, and E4M3 needs only 2^-10..2^9).
  const int s = exponent_shift < -120 ? -120 : (exponent_shift > 120 ? 120 : exponent_shift);
  const float scaled = v * pow2(s);
  const uint8_t code = float_to_e4m3(scaled);
  *out = code;
  // A clamped shift moves a nonzero v to 0 or to saturation, so this comparison also rejects it.
  return float_as_bits(e4m3_to_float(code)) == float_as_bits(scaled);
}
// The UE8M0 code k_ref of a fold's fp32 base scale 2^(k_ref - 127) (a normal power of two, or 0 for rows past n,
// whose code 0 is never used): its exponent field.
SYMMOE_HD int fold_base_code(float base_scale) { return int(float_as_bits(base_scale) >> 23); }

}  // namespace symmoe::fmt
