// Golden GEMM references against naive loops written independently here (explicit index arithmetic for data and
// scales), the L1 epilogue against the fp64 SwiGLU, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/compare.hpp"
#include "symmoe/reference/gemm.hpp"

namespace symmoe::ref {
namespace {

// Random e4m3 code, never NaN (0x7f / 0xff).
uint8_t random_e4m3(std::mt19937_64& rng) {
  for (;;) {
    const uint8_t c = uint8_t(rng() & 0xff);
    if ((c & 0x7f) != 0x7f) return c;
  }
}

float random_scale(std::mt19937_64& rng, bool pow2) {
  std::uniform_real_distribution<float> u(0.25f, 4.f);
  const float s = u(rng) * 1e-2f;
  return pow2 ? std::exp2(std::ceil(std::log2(s))) : s;
}

Fp8Activations random_activations(int M, int K, bool pow2, std::mt19937_64& rng) {
  Fp8Activations a;
  a.num_rows = M, a.num_cols = K, a.block = 128;
  a.data.resize(size_t(M) * K);
  for (auto& c : a.data) c = random_e4m3(rng);
  a.scales.resize(size_t(M) * (K / 128));
  for (auto& s : a.scales) s = random_scale(rng, pow2);
  return a;
}

Fp8BlockWeights random_weights(int N, int K, std::mt19937_64& rng) {
  Fp8BlockWeights b;
  b.num_rows = N, b.num_cols = K;
  b.data.resize(size_t(N) * K);
  for (auto& c : b.data) c = random_e4m3(rng);
  b.scales.resize(size_t((N + 127) / 128) * ((K + 127) / 128));
  for (auto& s : b.scales) s = random_scale(rng, false);
  return b;
}

double a_value(const Fp8Activations& a, int m, int k) {
  return double(fmt::e4m3_to_float(a.data[size_t(m) * a.num_cols + k])) *
         double(a.scales[size_t(m) * (a.num_cols / 128) + k / 128]);
}
double b_value(const Fp8BlockWeights& b, int n, int k) {
  return double(fmt::e4m3_to_float(b.data[size_t(n) * b.num_cols + k])) *
         double(b.scales[size_t(n / 128) * ((b.num_cols + 127) / 128) + k / 128]);
}

TEST(ReferenceGemm, ExactMatchesNaiveDoubleLoop) {
  std::mt19937_64 rng(1);
  for (auto [M, N, K] : {std::tuple{5, 200, 256}, std::tuple{1, 129, 384}, std::tuple{17, 64, 128}}) {
    const auto a = random_activations(M, K, false, rng);
    const auto b = random_weights(N, K, rng);
    const auto got = gemm_exact(a, b);
    ASSERT_EQ(got.size(), size_t(M) * N);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double want = 0, mag = 0;
        for (int k = 0; k < K; ++k)
          want += a_value(a, m, k) * b_value(b, n, k), mag += std::fabs(a_value(a, m, k) * b_value(b, n, k));
        ASSERT_NEAR(got[size_t(m) * N + n], want, 1e-13 * mag) << "m=" << m << " n=" << n;
      }
  }
}

TEST(ReferenceGemm, FaithfulMatchesNaivePerBlockPromotionBitwise) {
  std::mt19937_64 rng(2);
  for (bool pow2 : {false, true}) {
    const int M = 7, N = 150, K = 512;
    const auto a = random_activations(M, K, pow2, rng);
    const auto b = random_weights(N, K, rng);
    const auto got = gemm_faithful(a, b);
    std::vector<float> want(size_t(M) * N);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        float acc = 0.f;
        for (int kb = 0; kb < K / 128; ++kb) {
          float partial = 0.f;  // four chained k32 WGMMA steps (tests/cpu/test_reference_wgmma.cpp checks one)
          for (int k = kb * 128; k < kb * 128 + 128; k += 32)
            partial = wgmma_e4m3_k32(partial, &a.data[size_t(m) * K + k], &b.data[size_t(n) * K + k]);
          const float sa = a.scales[size_t(m) * (K / 128) + kb], sb = b.scales[size_t(n / 128) * (K / 128) + kb];
          acc = std::fmaf(sa * sb, partial, acc);
        }
        want[size_t(m) * N + n] = acc;
      }
    EXPECT_TRUE(test::bitwise_equal(want, got, "gemm_faithful"));
    // Faithful vs exact: the tensor core's 13-bit alignment truncation (~1e-4 of each step's largest term), far
    // below FP8 quantisation error, but not zero.
    const auto exact = gemm_exact(a, b);
    std::vector<double> got_d(got.begin(), got.end());
    const double err = test::rel_frobenius(exact, got_d);
    EXPECT_LT(err, 2e-3) << "faithful vs exact";
    EXPECT_GT(err, 1e-6) << "faithful vs exact: the WGMMA truncation is missing";
  }
}

TEST(ReferenceGemm, RowRangesAreSlicesOfTheFullProduct) {
  std::mt19937_64 rng(3);
  const auto a = random_activations(20, 256, true, rng);
  const auto b = random_weights(96, 256, rng);
  const auto full_f = gemm_faithful(a, b);
  const auto full_e = gemm_exact(a, b);
  for (auto [lo, hi] : {std::pair{0, 20}, std::pair{3, 11}, std::pair{19, 20}, std::pair{7, 7}}) {
    const auto f = gemm_faithful(a, lo, hi, b);
    const auto e = gemm_exact(a, lo, hi, b);
    ASSERT_EQ(f.size(), size_t(hi - lo) * 96);
    EXPECT_TRUE(test::bitwise_equal(full_f.data() + size_t(lo) * 96, f.data(), f.size(), "faithful rows"));
    EXPECT_TRUE(test::bitwise_equal(full_e.data() + size_t(lo) * 96, e.data(), e.size(), "exact rows"));
  }
}

TEST(ReferenceGemm, ExactWithDoubleLeftOperand) {
  std::mt19937_64 rng(4);
  const auto a = random_activations(6, 256, false, rng);
  const auto b = random_weights(40, 256, rng);
  std::vector<double> ad(6 * 256);
  for (int m = 0; m < 6; ++m)
    for (int k = 0; k < 256; ++k) ad[m * 256 + k] = a_value(a, m, k);
  const auto want = gemm_exact(a, b);
  const auto got = gemm_exact(ad, 6, b);
  EXPECT_TRUE(test::bitwise_equal(want, got, "gemm_exact(double A)"));
}

TEST(ReferenceGemm, L1EpilogueQuantisesSwigluPer128WithPow2Scales) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.f, 3.f);
  const int M = 9, I = 256;
  for (float clamp : {0.f, 2.5f}) {
    std::vector<float> acc(size_t(M) * 2 * I), w(M);
    for (auto& v : acc) v = nd(rng);
    for (auto& v : w) v = std::uniform_real_distribution<float>(0.05f, 1.f)(rng);
    w[3] = 0.f;  // a zero weight (masked lane) gives an all-zero block with the floor scale
    const auto q = l1_epilogue(acc, M, I, w, clamp);
    ASSERT_EQ(q.num_rows, M);
    ASSERT_EQ(q.num_cols, I);
    ASSERT_EQ(q.block, 128);
    const std::vector<double> acc_d(acc.begin(), acc.end()), w_d(w.begin(), w.end());
    const auto h = swiglu_exact(acc_d, M, I, w_d, clamp);
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < I / 128; ++j) {
        const float s = q.scales[size_t(m) * (I / 128) + j];
        int e = 0;
        ASSERT_EQ(std::frexp(s, &e), 0.5f) << "scale not a power of two: " << s;
        double amax = 0;
        for (int c = 0; c < 128; ++c) amax = std::max(amax, std::fabs(h[size_t(m) * I + j * 128 + c]));
        if (amax > 1e-3) {  // above the floor: 224 < amax/scale <= 448 (smallest power of two that fits)
          EXPECT_LE(amax / s, 448.0 * (1 + 1e-6)) << "m=" << m << " j=" << j;
          EXPECT_GT(amax / s, 224.0 * (1 - 1e-6)) << "m=" << m << " j=" << j;
        }
        for (int c = 0; c < 128; ++c) {
          const double got = q.dequant(m, j * 128 + c), want = h[size_t(m) * I + j * 128 + c];
          // e4m3 has 3 mantissa bits: half an ulp is <= 2^-4 relative, plus the subnormal step s * 2^-10.
          EXPECT_LE(std::fabs(got - want), std::fabs(want) / 16 + s * std::ldexp(1.0, -10) + 1e-6 * std::fabs(want))
              << "m=" << m << " c=" << j * 128 + c;
        }
      }
    for (int c = 0; c < I; ++c) EXPECT_EQ(q.dequant(3, c), 0.f);
  }
}

TEST(ReferenceGemm, SwigluFaithfulFormulaAndClamp) {
  // silu(g) * u * w in fp32, order (silu * u) * w; clamp g from above, u on both sides.
  const float g = 1.75f, u = -0.5f, w = 0.3f;
  const float silu = g / (1.f + std::exp(-g));
  EXPECT_EQ(swiglu_faithful(g, u, w, 0.f), (silu * u) * w);
  const float c = 1.f;
  const float silu_c = c / (1.f + std::exp(-c));
  EXPECT_EQ(swiglu_faithful(g, -7.f, w, c), (silu_c * -c) * w);
  EXPECT_EQ(swiglu_faithful(-3.f, 0.25f, 1.f, c), ((-3.f / (1.f + std::exp(3.f))) * 0.25f) * 1.f);
}

TEST(ReferenceGemm, BadArgumentsRaiseNamedErrors) {
  std::mt19937_64 rng(6);
  const auto a = random_activations(4, 256, false, rng);
  const auto b = random_weights(8, 384, rng);
  try {
    gemm_faithful(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("K mismatch"), std::string::npos) << e.what();
  }
  const auto b2 = random_weights(8, 256, rng);
  EXPECT_THROW(gemm_exact(a, 2, 5, b2), Error);
  EXPECT_THROW(gemm_faithful(a, 3, 2, b2), Error);
  auto a32 = a;
  a32.block = 32;
  a32.scales.resize(4 * 8);
  EXPECT_THROW(gemm_faithful(a32, b2), Error);
  EXPECT_NO_THROW(gemm_exact(a32, b2));  // exact accepts any block that divides K
  EXPECT_THROW(l1_epilogue(std::vector<float>(2 * 2 * 100), 2, 100, {1.f, 1.f}, 0.f), Error);
  EXPECT_THROW(l1_epilogue(std::vector<float>(2 * 2 * 128), 2, 128, {1.f}, 0.f), Error);
  EXPECT_THROW(swiglu_exact(std::vector<double>(5), 1, 128, {1.0}, 0.0), Error);
}

}  // namespace
}  // namespace symmoe::ref
