// Host block quantisers (quant.hpp): scales follow the rule of formats.hpp block by block, dequantisation error is
// within half an ulp of each block's scaled grid, packing and edge blocks are right, bad arguments are rejected
// with errors that name the argument.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "symmoe/common.hpp"
#include "symmoe/quant.hpp"

namespace fmt = symmoe::fmt;

namespace {

// Half the grid spacing of E4M3 / E2M1 around magnitude v (v already divided by the block scale).
double e4m3_half_ulp(double v) {
  if (v < std::ldexp(1.0, -6)) return std::ldexp(1.0, -10);  // subnormal spacing 2^-9
  int e = 0;
  std::frexp(v, &e);  // v in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 1 - 3 - 1);
}
double e2m1_half_ulp(double v) {
  if (v < 2.0) return 0.25;  // 0, 0.5, 1, 1.5, 2
  if (v < 4.0) return 0.5;   // 2, 3, 4
  return 1.0;                // 4, 6
}

enum class Dist { kNormal, kSkewed, kOutliers };
const char* name(Dist d) { return d == Dist::kNormal ? "normal" : d == Dist::kSkewed ? "skewed" : "outliers"; }

// Fresh random matrix: normal; skewed (magnitudes 2^U(-20,12), like activation channels with Zipf-ish scales);
// or normal with a few huge outliers (1e4) and some all-zero 32-blocks.
std::vector<float> random_matrix(int rows, int cols, Dist dist, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> expo(-20.0f, 12.0f);
  std::vector<float> x(size_t(rows) * cols);
  for (auto& v : x) {
    v = normal(rng);
    if (dist == Dist::kSkewed) v = std::copysign(std::exp2(expo(rng)), v);
  }
  if (dist == Dist::kOutliers) {
    for (int i = 0; i < rows; ++i) x[size_t(rng() % x.size())] = (rng() & 1 ? 1e4f : -1e4f);
    for (int r = 0; r < rows; r += 3) std::fill_n(x.begin() + size_t(r) * cols + (rng() % (cols / 32)) * 32, 32, 0.0f);
  }
  return x;
}

float amax_of(const std::vector<float>& x, int cols, int r0, int r1, int c0, int c1) {
  double m = 0;
  for (int r = r0; r < r1; ++r)
    for (int c = c0; c < c1; ++c) m = std::max(m, std::fabs(double(x[size_t(r) * cols + c])));
  return float(m);
}

template <typename Fn>
void expect_error_naming(Fn fn, const std::string& argument) {
  try {
    fn();
    ADD_FAILURE() << "no symmoe::Error for bad " << argument;
  } catch (const symmoe::Error& e) {
    EXPECT_NE(std::string(e.what()).find(argument), std::string::npos) << e.what();
    EXPECT_EQ(e.component(), "formats");
  }
}

}  // namespace

TEST(Quant, ActivationsScalesAndRoundTrip) {
  const int rows = 37, cols = 512;
  uint64_t seed = 1;
  for (Dist dist : {Dist::kNormal, Dist::kSkewed, Dist::kOutliers})
    for (int block : {128, 32})
      for (fmt::ScaleFormat format : {fmt::ScaleFormat::kFp32, fmt::ScaleFormat::kUe8m0}) {
        SCOPED_TRACE(std::string(name(dist)) + " block " + std::to_string(block) + " " + fmt::to_string(format));
        const std::vector<float> x = random_matrix(rows, cols, dist, seed++);
        const symmoe::Fp8Activations q = symmoe::quantize_activations(x.data(), rows, cols, block, format);
        ASSERT_EQ(q.data.size(), size_t(rows) * cols);
        ASSERT_EQ(q.scales.size(), size_t(rows) * (cols / block));
        for (int r = 0; r < rows; ++r)
          for (int c0 = 0; c0 < cols; c0 += block) {
            const float amax = amax_of(x, cols, r, r + 1, c0, c0 + block);
            const float s = q.scale(r, c0);
            ASSERT_EQ(s, fmt::scale_for_amax(amax, fmt::kE4M3Max, format)) << "row " << r << " col " << c0;
            if (format == fmt::ScaleFormat::kUe8m0) {
              ASSERT_TRUE(fmt::is_ue8m0_scale(s));
            }
            for (int c = c0; c < c0 + block; ++c) {
              const double xv = x[size_t(r) * cols + c], scaled = std::fabs(xv) / s;
              // Nothing saturates: |x| / s <= 448 up to the one fp32 division rounding of the kFp32 scale.
              ASSERT_LE(scaled, fmt::kE4M3Max * (1 + 1e-6)) << "row " << r << " col " << c;
              const double err = std::fabs(double(q.dequant(r, c)) - xv);
              ASSERT_LE(err, e4m3_half_ulp(scaled) * s * (1 + 1e-6)) << "row " << r << " col " << c << " x " << xv;
            }
          }
      }
}

TEST(Quant, ZeroBlockGetsFloorScaleAndZeros) {
  const int cols = 256;
  std::vector<float> x(size_t(2) * cols, 0.0f);
  for (int c = 128; c < cols; ++c) x[c] = 0.5f;  // row 0: one zero block, one nonzero block
  for (fmt::ScaleFormat format : {fmt::ScaleFormat::kFp32, fmt::ScaleFormat::kUe8m0}) {
    const symmoe::Fp8Activations q = symmoe::quantize_activations(x.data(), 2, cols, 128, format);
    const float floor_scale = fmt::scale_for_amax(fmt::kAmaxFloor, fmt::kE4M3Max, format);
    EXPECT_EQ(q.scale(0, 0), floor_scale);
    EXPECT_EQ(q.scale(1, 0), floor_scale);
    EXPECT_EQ(q.scale(1, 128), floor_scale);
    EXPECT_NE(q.scale(0, 128), floor_scale);
    for (int c = 0; c < 128; ++c) EXPECT_EQ(q.data[c], 0) << c;
    for (int c = 0; c < cols; ++c) EXPECT_EQ(q.data[cols + c], 0) << c;
  }
}

TEST(Quant, OneHugeValueSaturatesNothing) {
  const int cols = 128;
  std::vector<float> x(cols, 0.01f);
  x[77] = -3.0e5f;
  x[5] = 1.0f;
  for (fmt::ScaleFormat format : {fmt::ScaleFormat::kFp32, fmt::ScaleFormat::kUe8m0}) {
    const symmoe::Fp8Activations q = symmoe::quantize_activations(x.data(), 1, cols, 128, format);
    const float huge = fmt::e4m3_to_float(q.data[77]);
    EXPECT_LE(std::fabs(huge), fmt::kE4M3Max);
    EXPECT_LE(std::fabs(double(q.dequant(0, 77)) - x[77]), e4m3_half_ulp(3.0e5 / q.scale(0, 0)) * q.scale(0, 0));
    if (format == fmt::ScaleFormat::kFp32) {
      EXPECT_EQ(huge, -fmt::kE4M3Max);  // amax maps onto the top code
    }
  }
}

TEST(Quant, Weights128x128PartialEdgeBlocks) {
  const int n = 300, k = 200;  // 3 x 2 blocks, the last row and column of blocks partial
  for (fmt::ScaleFormat format : {fmt::ScaleFormat::kFp32, fmt::ScaleFormat::kUe8m0}) {
    SCOPED_TRACE(fmt::to_string(format));
    const std::vector<float> w = random_matrix(n, k, Dist::kSkewed, 99 + int(format));
    const symmoe::Fp8BlockWeights q = format == fmt::ScaleFormat::kFp32
                                          ? symmoe::quantize_weights_128x128(w.data(), n, k)
                                          : symmoe::quantize_weights_128x128(w.data(), n, k, format);
    ASSERT_EQ(q.num_scale_cols(), 2);
    ASSERT_EQ(q.scales.size(), size_t(3 * 2));
    for (int br = 0; br < 3; ++br)
      for (int bc = 0; bc < 2; ++bc) {
        const float amax = amax_of(w, k, br * 128, std::min(n, br * 128 + 128), bc * 128, std::min(k, bc * 128 + 128));
        EXPECT_EQ(q.scales[br * 2 + bc], fmt::scale_for_amax(amax, fmt::kE4M3Max, format)) << br << "," << bc;
      }
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < k; ++c) {
        const double wv = w[size_t(r) * k + c], s = q.scale(r, c);
        ASSERT_LE(std::fabs(double(q.dequant(r, c)) - wv), e4m3_half_ulp(std::fabs(wv) / s) * s * (1 + 1e-6))
            << "row " << r << " col " << c;
      }
  }
  // Empty and tiny shapes are fine.
  EXPECT_TRUE(symmoe::quantize_weights_128x128(nullptr, 0, 0).data.empty());
  const float one = 1.0f;
  EXPECT_EQ(symmoe::quantize_weights_128x128(&one, 1, 1).scales.size(), 1u);
}

TEST(Quant, Fp4WeightsPackingScalesAndRoundTrip) {
  const int n = 19, k = 160;
  for (Dist dist : {Dist::kNormal, Dist::kSkewed, Dist::kOutliers}) {
    SCOPED_TRACE(name(dist));
    const std::vector<float> w = random_matrix(n, k, dist, 500 + int(dist));
    const symmoe::Fp4Weights q = symmoe::quantize_weights_fp4(w.data(), n, k);
    ASSERT_EQ(q.data.size(), size_t(n) * k / 2);
    ASSERT_EQ(q.scales_ue8m0.size(), size_t(n) * k / 32);
    for (int r = 0; r < n; ++r)
      for (int c0 = 0; c0 < k; c0 += 32) {
        const float s = fmt::ue8m0_to_float(q.scales_ue8m0[size_t(r) * (k / 32) + c0 / 32]);
        // Independent rule: smallest power of two s with max(amax, floor) / 6 <= s.
        const double a = std::max(double(amax_of(w, k, r, r + 1, c0, c0 + 32)), double(fmt::kAmaxFloor));
        ASSERT_GE(s, a / 6) << "row " << r << " col " << c0;
        ASSERT_LT(s / 2, a / 6) << "row " << r << " col " << c0;
        for (int c = c0; c < c0 + 32; ++c) {
          const float wv = w[size_t(r) * k + c];
          const uint8_t byte = q.data[(size_t(r) * k + c) / 2];
          const uint8_t nibble = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);  // column 2j low, 2j+1 high
          ASSERT_EQ(nibble, fmt::float_to_e2m1(wv / s)) << "row " << r << " col " << c;
          ASSERT_LE(std::fabs(double(q.dequant(r, c)) - wv), e2m1_half_ulp(std::fabs(wv) / s) * s)
              << "row " << r << " col " << c;
        }
      }
  }
}

TEST(Quant, BadArgumentsNameTheArgument) {
  std::vector<float> x(64 * 256, 1.0f);
  expect_error_naming([&] { symmoe::quantize_activations(x.data(), 4, 256, 64, fmt::ScaleFormat::kFp32); }, "block");
  expect_error_naming([&] { symmoe::quantize_activations(x.data(), 4, 96, 128, fmt::ScaleFormat::kFp32); }, "num_cols");
  expect_error_naming([&] { symmoe::quantize_activations(x.data(), 4, 48, 32, fmt::ScaleFormat::kUe8m0); }, "num_cols");
  expect_error_naming([&] { symmoe::quantize_activations(x.data(), -1, 128, 128, fmt::ScaleFormat::kFp32); },
                      "num_rows");
  expect_error_naming([&] { symmoe::quantize_activations(nullptr, 2, 128, 128, fmt::ScaleFormat::kFp32); }, "null");
  expect_error_naming([&] { symmoe::quantize_weights_fp4(x.data(), 4, 48); }, "num_cols");
  expect_error_naming([&] { symmoe::quantize_weights_fp4(x.data(), 4, -32); }, "num_cols");
  expect_error_naming([&] { symmoe::quantize_weights_128x128(x.data(), -3, 128); }, "num_rows");
}
