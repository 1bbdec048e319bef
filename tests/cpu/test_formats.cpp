// formats.hpp against CUDA's own host conversions (cuda_fp8.h, cuda_fp4.h, cuda_bf16.h, compiled here by g++):
// every decode, every code value, every midpoint and its neighbours, saturation edges, specials, and millions of
// random floats, compared bitwise. Then the UE8M0 scale rule and the FP4 -> FP8 scale fold.
#include <cuda_bf16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/compare.hpp"
#include "symmoe/formats.hpp"

namespace fmt = symmoe::fmt;
using symmoe::test::bitwise_equal;

namespace {

// ---- CUDA's host conversions (the reference) ----
uint32_t half_raw_to_float_bits(__half_raw h) { return fmt::float_as_bits(__half2float(__half(h))); }
uint8_t cuda_e4m3(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
uint8_t cuda_e5m2(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); }
uint8_t cuda_e2m1(float x) { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); }
uint16_t cuda_bf16(float x) {
  const __nv_bfloat16_raw r = __float2bfloat16_rn(x);
  return r.x;
}

// All four encoders on `inputs`, bitwise against CUDA; reports the first differing input.
void expect_encoders_match_cuda(const std::vector<float>& inputs, const std::string& what) {
  std::vector<uint8_t> ours8(inputs.size()), cuda8(inputs.size());
  std::vector<uint16_t> ours16(inputs.size()), cuda16(inputs.size());
  struct Case {
    const char* name;
    uint8_t (*ours)(float);
    uint8_t (*cuda)(float);
  };
  const Case cases[] = {{"e4m3", [](float x) { return fmt::float_to_e4m3(x); }, cuda_e4m3},
                        {"e5m2", [](float x) { return fmt::float_to_e5m2(x); }, cuda_e5m2},
                        {"e2m1", [](float x) { return fmt::float_to_e2m1(x); }, cuda_e2m1}};
  for (const Case& c : cases) {
    size_t first_bad = inputs.size();
    for (size_t i = 0; i < inputs.size(); ++i) {
      ours8[i] = c.ours(inputs[i]);
      cuda8[i] = c.cuda(inputs[i]);
      if (ours8[i] != cuda8[i] && first_bad == inputs.size()) first_bad = i;
    }
    EXPECT_TRUE(bitwise_equal(cuda8, ours8, what + " float_to_" + c.name))
        << " first bad input bits 0x" << std::hex
        << (first_bad < inputs.size() ? fmt::float_as_bits(inputs[first_bad]) : 0u);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    ours16[i] = fmt::float_to_bf16(inputs[i]);
    cuda16[i] = cuda_bf16(inputs[i]);
  }
  EXPECT_TRUE(bitwise_equal(cuda16, ours16, what + " float_to_bf16"));
}

// Every finite value of a format (both signs), the midpoints between neighbours, and one fp32 ulp either side of
// each value and each midpoint. `values` are the non-negative finite values in increasing order.
std::vector<float> values_midpoints_and_neighbours(const std::vector<float>& values) {
  std::vector<float> out;
  auto push_around = [&](float v) {
    for (float s : {1.0f, -1.0f}) {
      out.push_back(s * v);
      out.push_back(s * std::nextafter(v, 0.0f));
      out.push_back(s * std::nextafter(v, INFINITY));
    }
  };
  for (size_t i = 0; i < values.size(); ++i) {
    push_around(values[i]);
    if (i + 1 < values.size()) {
      const double mid = (double(values[i]) + double(values[i + 1])) / 2;
      EXPECT_EQ(double(float(mid)), mid) << "midpoint not exact in fp32";
      push_around(float(mid));
    }
  }
  // Beyond the top: the would-be next midpoint (max + half ulp) and the would-be next value.
  const float max = values.back(), ulp = values.back() - values[values.size() - 2];
  push_around(max + ulp / 2);
  push_around(max + ulp);
  push_around(2 * max);
  return out;
}

std::vector<float> positive_finite_values(float (*decode)(uint8_t), int num_codes) {
  std::vector<float> v;
  for (int c = 0; c < num_codes; ++c) {
    const float x = decode(uint8_t(c));
    if (std::isfinite(x)) v.push_back(x);
  }
  for (size_t i = 1; i < v.size(); ++i) EXPECT_LT(v[i - 1], v[i]) << "codes not monotonic at " << i;
  return v;
}

std::vector<float> special_values() {
  std::vector<float> v = {0.0f,    -0.0f,    INFINITY,     -INFINITY,     FLT_MAX, -FLT_MAX,
                          FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, 1.0f,    -1.0f};
  for (uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA00000u})
    v.push_back(fmt::bits_as_float(bits));
  for (uint32_t bits = 1; bits < 0x00800000u; bits = bits * 3 + 1) v.push_back(fmt::bits_as_float(bits));  // subnormals
  for (float edge : {fmt::kE4M3Max, fmt::kE5M2Max, fmt::kE2M1Max, 464.0f, 61440.0f, 7.0f, 5.0f})
    for (float s : {1.0f, -1.0f}) {
      v.push_back(s * edge);
      v.push_back(s * std::nextafter(edge, 0.0f));
      v.push_back(s * std::nextafter(edge, INFINITY));
    }
  return v;
}

}  // namespace

// ---- decoding: every code ----
TEST(Formats, DecodeAllE4M3AndE5M2Codes) {
  std::vector<uint32_t> ours4(256), cuda4(256), ours5(256), cuda5(256);
  for (int c = 0; c < 256; ++c) {
    ours4[c] = fmt::float_as_bits(fmt::e4m3_to_float(uint8_t(c)));
    cuda4[c] = half_raw_to_float_bits(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), __NV_E4M3));
    ours5[c] = fmt::float_as_bits(fmt::e5m2_to_float(uint8_t(c)));
    cuda5[c] = half_raw_to_float_bits(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), __NV_E5M2));
  }
  EXPECT_TRUE(bitwise_equal(cuda4, ours4, "e4m3_to_float"));
  EXPECT_TRUE(bitwise_equal(cuda5, ours5, "e5m2_to_float"));
  EXPECT_EQ(fmt::e4m3_to_float(0x7E), fmt::kE4M3Max);
  EXPECT_EQ(fmt::e5m2_to_float(0x7B), fmt::kE5M2Max);
}

TEST(Formats, DecodeAllE2M1Codes) {
  std::vector<uint32_t> ours(16), cuda(16);
  for (int c = 0; c < 16; ++c) {
    ours[c] = fmt::float_as_bits(fmt::e2m1_to_float(uint8_t(c)));
    cuda[c] = half_raw_to_float_bits(__nv_cvt_fp4_to_halfraw(__nv_fp4_storage_t(c), __NV_E2M1));
  }
  EXPECT_TRUE(bitwise_equal(cuda, ours, "e2m1_to_float"));
  EXPECT_EQ(fmt::e2m1_to_float(0x7), fmt::kE2M1Max);
}

TEST(Formats, DecodeAllBf16Codes) {
  std::vector<uint32_t> ours(65536), cuda(65536);
  for (uint32_t c = 0; c < 65536; ++c) {
    ours[c] = fmt::float_as_bits(fmt::bf16_to_float(uint16_t(c)));
    __nv_bfloat16_raw r;
    r.x = uint16_t(c);
    cuda[c] = fmt::float_as_bits(__bfloat162float(__nv_bfloat16(r)));
  }
  EXPECT_TRUE(bitwise_equal(cuda, ours, "bf16_to_float"));
}

// ---- encoding: every value, midpoint (ties to even), neighbours, saturation edges ----
TEST(Formats, EncodeValuesMidpointsAndNeighbours) {
  expect_encoders_match_cuda(values_midpoints_and_neighbours(positive_finite_values(fmt::e4m3_to_float, 128)),
                             "e4m3 grid");
  expect_encoders_match_cuda(values_midpoints_and_neighbours(positive_finite_values(fmt::e5m2_to_float, 128)),
                             "e5m2 grid");
  expect_encoders_match_cuda(values_midpoints_and_neighbours(positive_finite_values(fmt::e2m1_to_float, 8)),
                             "e2m1 grid");
  std::vector<float> bf16_values;
  for (uint32_t c = 0; c < 0x7F80; ++c) bf16_values.push_back(fmt::bf16_to_float(uint16_t(c)));
  expect_encoders_match_cuda(values_midpoints_and_neighbours(bf16_values), "bf16 grid");
}

TEST(Formats, EncodeRoundTripsEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const float v4 = fmt::e4m3_to_float(uint8_t(c)), v5 = fmt::e5m2_to_float(uint8_t(c));
    if (!std::isnan(v4)) {
      EXPECT_EQ(fmt::float_to_e4m3(v4), c) << "e4m3 code " << c;
    }
    if (std::isfinite(v5)) {
      EXPECT_EQ(fmt::float_to_e5m2(v5), c) << "e5m2 code " << c;
    }
  }
  for (int c = 0; c < 16; ++c) EXPECT_EQ(fmt::float_to_e2m1(fmt::e2m1_to_float(uint8_t(c))), c) << "e2m1 " << c;
  for (uint32_t c = 0; c < 65536; ++c) {
    const float v = fmt::bf16_to_float(uint16_t(c));
    if (!std::isnan(v)) {
      EXPECT_EQ(fmt::float_to_bf16(v), c) << "bf16 code " << c;
    }
  }
}

TEST(Formats, EncodeSpecialsAndSaturationEdges) {
  expect_encoders_match_cuda(special_values(), "specials");
  // The documented behaviour (formats.hpp header), stated once here so a CUDA change is noticed.
  const float nan = fmt::bits_as_float(0xFFC00000u);
  EXPECT_EQ(fmt::float_to_e4m3(nan), 0x7F);
  EXPECT_EQ(fmt::float_to_e5m2(nan), 0x7F);
  EXPECT_EQ(fmt::float_to_e2m1(nan), 0x7);
  EXPECT_EQ(fmt::float_to_bf16(nan), 0x7FFF);
  EXPECT_EQ(fmt::float_to_e4m3(INFINITY), 0x7E);
  EXPECT_EQ(fmt::float_to_e4m3(-INFINITY), 0xFE);
  EXPECT_EQ(fmt::float_to_e5m2(-INFINITY), 0xFB);
  EXPECT_EQ(fmt::float_to_e2m1(-INFINITY), 0xF);
  EXPECT_EQ(fmt::float_to_e4m3(-0.0f), 0x80);
}

TEST(Formats, EncodeRandomFloats) {
  std::mt19937_64 rng(20261129);
  std::vector<float> inputs;
  // Uniform over all 2^32 bit patterns (mostly huge/tiny magnitudes, plus NaNs).
  for (int i = 0; i < 1500000; ++i) inputs.push_back(fmt::bits_as_float(uint32_t(rng())));
  // Uniform sign and mantissa, exponent uniform over [-30, 20]: where all four formats do their rounding.
  std::uniform_int_distribution<int> exp_dist(-30 + 127, 20 + 127);
  for (int i = 0; i < 2500000; ++i) {
    const uint32_t bits = (uint32_t(rng()) & 0x807FFFFFu) | (uint32_t(exp_dist(rng)) << 23);
    inputs.push_back(fmt::bits_as_float(bits));
  }
  expect_encoders_match_cuda(inputs, "random");
}

// ---- UE8M0 and the scale rule ----
TEST(Formats, Ue8m0DecodeAndEncode) {
  for (int e = 0; e < 255; ++e) {
    const float v = fmt::ue8m0_to_float(uint8_t(e));
    EXPECT_EQ(v, std::ldexp(1.0f, e - 127)) << "ue8m0 " << e;
    EXPECT_TRUE(fmt::is_ue8m0_scale(v)) << e;
    EXPECT_EQ(fmt::ue8m0_from_scale(v), e);
  }
  EXPECT_TRUE(std::isnan(fmt::ue8m0_to_float(0xFF)));
  for (float bad : {0.0f, -1.0f, 3.0f, 1.5f, INFINITY, fmt::bits_as_float(0x7FC00000u)})
    EXPECT_FALSE(fmt::is_ue8m0_scale(bad)) << bad;
}

TEST(Formats, ScaleForAmaxRule) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> exp_dist(-40 + 127, 60 + 127);
  for (float fmt_max : {fmt::kE4M3Max, fmt::kE2M1Max, fmt::kE5M2Max}) {
    for (int i = 0; i < 200000; ++i) {
      const float amax = fmt::bits_as_float((uint32_t(rng()) & 0x007FFFFFu) | (uint32_t(exp_dist(rng)) << 23));
      const float floored = std::max(amax, fmt::kAmaxFloor);
      const float r = floored / fmt_max;
      EXPECT_EQ(fmt::scale_for_amax(amax, fmt_max, fmt::ScaleFormat::kFp32), r);
      // Independent ceil(log2(r)) via frexp: r = m * 2^e with m in [0.5, 1); power of two iff m == 0.5.
      int e = 0;
      const double m = std::frexp(double(r), &e);
      const float expected = std::ldexp(1.0f, m == 0.5 ? e - 1 : e);
      const float s = fmt::scale_for_amax(amax, fmt_max, fmt::ScaleFormat::kUe8m0);
      ASSERT_EQ(s, expected) << "amax " << amax << " fmt_max " << fmt_max;
      ASSERT_TRUE(fmt::is_ue8m0_scale(s));
      ASSERT_LE(floored * (1.0f / s), fmt_max) << "amax would saturate";
    }
  }
  // amax = 0, NaN and denormal amax give the floor's scale; inf gives a finite scale.
  for (float amax : {0.0f, 1e-30f, fmt::bits_as_float(0x7FC00000u)}) {
    EXPECT_EQ(fmt::scale_for_amax(amax, fmt::kE4M3Max, fmt::ScaleFormat::kFp32), fmt::kAmaxFloor / fmt::kE4M3Max);
    EXPECT_EQ(fmt::scale_for_amax(amax, fmt::kE4M3Max, fmt::ScaleFormat::kUe8m0),
              fmt::ceil_pow2(fmt::kAmaxFloor / fmt::kE4M3Max));
  }
  EXPECT_TRUE(std::isfinite(fmt::scale_for_amax(INFINITY, fmt::kE4M3Max, fmt::ScaleFormat::kFp32)));
  EXPECT_TRUE(fmt::is_ue8m0_scale(fmt::scale_for_amax(INFINITY, fmt::kE2M1Max, fmt::ScaleFormat::kUe8m0)));
  // The floor keeps both scale kinds normal fp32 numbers (formats.hpp's reason for 1e-4).
  EXPECT_GE(fmt::kAmaxFloor / fmt::kE5M2Max, FLT_MIN);
}

TEST(Formats, QuantizeE4m3Pow2EqualsDivision) {
  // x * (1/s) == x / s bitwise for power-of-two s: the kUe8m0 fast path is the same cast.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 500000; ++i) {
    const float x = fmt::bits_as_float(uint32_t(rng()));
    const float s = fmt::ue8m0_to_float(uint8_t(100 + rng() % 60));
    if (std::isnan(x)) continue;
    ASSERT_EQ(fmt::float_as_bits(x * (1.0f / s)), fmt::float_as_bits(x / s)) << x << " " << s;
    ASSERT_EQ(fmt::quantize_e4m3(x, s, fmt::ScaleFormat::kUe8m0), fmt::quantize_e4m3(x, s, fmt::ScaleFormat::kFp32));
  }
}

// ---- FP4 -> FP8 with the per-32 scale folded in ----
// Enumerates all nibbles x shifts; exactness is decided independently (double arithmetic + CUDA's conversion) and
// the range where every nibble folds exactly must be the documented [kFoldExactMinShift, kFoldExactMaxShift].
TEST(Formats, FoldE2m1ScaleIntoE4m3) {
  int min_all_exact = 1000, max_all_exact = -1000;
  for (int shift = -60; shift <= 60; ++shift) {
    bool all_exact = true;
    for (int nibble = 0; nibble < 16; ++nibble) {
      const double value = std::ldexp(double(fmt::e2m1_to_float(uint8_t(nibble))), shift);
      const uint8_t cuda_code = __nv_cvt_double_to_fp8(value, __NV_SATFINITE, __NV_E4M3);
      const float cuda_back = __half2float(__half(__nv_cvt_fp8_to_halfraw(cuda_code, __NV_E4M3)));
      const bool exact = double(cuda_back) == value;
      uint8_t ours = 0xAA;
      const bool ours_exact = fmt::e2m1_times_pow2_to_e4m3(uint8_t(nibble), shift, &ours);
      EXPECT_EQ(ours_exact, exact) << "nibble " << nibble << " shift " << shift;
      EXPECT_EQ(ours, cuda_code) << "nibble " << nibble << " shift " << shift;
      all_exact = all_exact && exact;
    }
    if (all_exact) {
      EXPECT_TRUE(max_all_exact == -1000 || max_all_exact == shift - 1) << "exact shifts not contiguous at " << shift;
      min_all_exact = std::min(min_all_exact, shift);
      max_all_exact = shift;
    }
  }
  EXPECT_EQ(min_all_exact, fmt::kFoldExactMinShift);
  EXPECT_EQ(max_all_exact, fmt::kFoldExactMaxShift);
}
