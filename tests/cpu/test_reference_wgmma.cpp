// The bit-accurate FP8 WGMMA k32 model (include/symmoe/reference/wgmma.hpp): hand-worked cases of its alignment and
// output truncation, and random steps against a second, independent transcription of the algorithm in fp64
// (frexp-based significands, std::trunc), including chained steps as the GEMM runs them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "symmoe/formats.hpp"
#include "symmoe/reference/wgmma.hpp"

namespace symmoe::ref {
namespace {

// The algorithm of wgmma.hpp written directly on values: significand in [1, 2) (or < 1 at the format's minimum
// exponent), product exponents added, terms truncated to 13 fractional bits at the largest exponent.
void significand_exponent(double x, int min_exp, double& s, int& e) {
  if (x == 0) {
    s = 0, e = -1000;
    return;
  }
  s = std::frexp(x, &e) * 2, e -= 1;  // 1 <= |s| < 2
  if (e < min_exp) s = std::ldexp(s, e - min_exp), e = min_exp;
}

float naive_step(float c, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  std::vector<double> sig;
  std::vector<int> exps;
  double s;
  int e;
  significand_exponent(c, -126, s, e);
  sig.push_back(s), exps.push_back(e);
  for (size_t i = 0; i < a.size(); ++i) {
    double sa, sb;
    int ea, eb;
    significand_exponent(fmt::e4m3_to_float(a[i]), -6, sa, ea);
    significand_exponent(fmt::e4m3_to_float(b[i]), -6, sb, eb);
    sig.push_back(sa * sb), exps.push_back(sa * sb == 0 ? -1000 : ea + eb);
  }
  int emax = -1000;
  for (size_t i = 0; i < sig.size(); ++i)
    if (sig[i] != 0) emax = std::max(emax, exps[i]);
  double sum = 0;
  for (size_t i = 0; i < sig.size(); ++i) sum += std::trunc(std::ldexp(sig[i], 13 + exps[i] - emax));
  const double v = std::ldexp(sum, emax - 13);
  if (v == 0) return 0.f;
  significand_exponent(v, -126, s, e);
  return float(std::ldexp(std::trunc(std::ldexp(s, 13)), e - 13));
}

uint8_t code_of(float v) { return fmt::float_to_e4m3(v); }

float step(float c, std::vector<float> av, std::vector<float> bv) {
  std::vector<uint8_t> a(32, 0), b(32, 0);
  for (size_t i = 0; i < av.size(); ++i) a[i] = code_of(av[i]), b[i] = code_of(bv[i]);
  return wgmma_e4m3_k32(c, a.data(), b.data());
}

TEST(ReferenceWgmma, TermsBelowThe13thFractionalBitOfTheLargestAreDropped) {
  // 1 + 2^-14: exact in fp32, but 2^-14 is below 2^(0 - 13) at the alignment of the term 1.
  EXPECT_EQ(step(0.f, {1.f, 0x1p-6f}, {1.f, 0x1p-8f}), 1.f);
  // Truncation is toward zero for negative terms too: 1 - 2^-14 gives 1 (round-down would give 1 - 2^-13).
  EXPECT_EQ(step(0.f, {1.f, -0x1p-6f}, {1.f, 0x1p-8f}), 1.f);
  // 2^-13 is kept at that alignment...
  EXPECT_EQ(step(0.f, {1.f, 0x1p-6f}, {1.f, 0x1p-7f}), 1.f + 0x1p-13f);
  // ... but the sum 2 + 2^-13 is truncated to 13 fractional bits at its own exponent 1: 2.
  EXPECT_EQ(step(0.f, {1.f, 1.f, 0x1p-6f}, {1.f, 1.f, 0x1p-7f}), 2.f);
  // The accumulator takes part in the alignment: at c = 4096 the unit is 2^(12 - 13) = 0.5, so a product 0.375
  // is dropped and 0.75 keeps 0.5.
  EXPECT_EQ(step(4096.f, {0.375f}, {1.f}), 4096.f);
  EXPECT_EQ(step(4096.f, {0.75f}, {1.f}), 4096.5f);
  EXPECT_EQ(step(4096.f, {1.f}, {1.f}), 4096.f + 1.f);
  // A product's nominal exponent is e_a + e_b even when its significand is >= 2: 1.875 * 1.875 = 3.515625 at
  // nominal exponent 0 keeps 13 fractional bits of 2^0 (exact here), and with 2^-13 added the result, at exponent 1,
  // keeps only 12 of them.
  EXPECT_EQ(step(0.f, {1.875f}, {1.875f}), 3.515625f);
  EXPECT_EQ(step(0.f, {1.875f, 0x1p-6f}, {1.875f, 0x1p-7f}), 3.515625f);
  // All terms zero: +0.
  EXPECT_EQ(std::signbit(step(0.f, {0.f, -0.f}, {1.f, 1.f})), false);
}

TEST(ReferenceWgmma, SmallIntegerSumsAreExact) {
  std::mt19937_64 rng(11);
  for (int it = 0; it < 2000; ++it) {
    std::vector<float> av(32), bv(32);
    float want = 0;
    for (int i = 0; i < 32; ++i) {
      av[i] = float(int(rng() % 9) - 4), bv[i] = float(int(rng() % 9) - 4);
      want += av[i] * bv[i];
    }
    ASSERT_EQ(step(0.f, av, bv), want) << "iteration " << it;
  }
}

TEST(ReferenceWgmma, MatchesIndependentTranscriptionOnRandomChains) {
  std::mt19937_64 rng(12);
  std::normal_distribution<float> nd(0.f, 1.f);
  size_t differs_from_fp32 = 0, steps = 0;
  for (int it = 0; it < 3000; ++it) {
    // Mixed magnitudes: a per-chain spread of 2^[-8, 8] on one operand, occasional zeros and subnormals.
    const float spread = std::ldexp(1.f, int(rng() % 17) - 8);
    float c = 0.f, c_naive = 0.f, c_fp32 = 0.f;
    for (int s = 0; s < 4; ++s) {
      std::vector<uint8_t> a(32), b(32);
      for (int i = 0; i < 32; ++i) {
        a[i] = rng() % 16 == 0 ? uint8_t(rng() % 8) : code_of(nd(rng) * spread);  // some subnormal codes
        b[i] = rng() % 32 == 0 ? uint8_t(0) : code_of(nd(rng) * 0.05f);
      }
      c = wgmma_e4m3_k32(c, a.data(), b.data());
      c_naive = naive_step(c_naive, a, b);
      ASSERT_EQ(fmt::float_as_bits(c), fmt::float_as_bits(c_naive)) << "chain " << it << " step " << s;
      for (int i = 0; i < 32; ++i) c_fp32 += fmt::e4m3_to_float(a[i]) * fmt::e4m3_to_float(b[i]);
      differs_from_fp32 += c != c_fp32;
      ++steps;
    }
  }
  // The model is not plain fp32 accumulation (that is what made the old golden model miss the GPU).
  EXPECT_GT(differs_from_fp32, steps / 10) << differs_from_fp32 << " of " << steps;
}

TEST(ReferenceWgmma, DecodesEveryCode) {
  for (int code = 0; code < 256; ++code) {
    const E4m3Parts p = e4m3_parts(uint8_t(code));
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(p.nan);
      continue;
    }
    EXPECT_EQ(double(p.sig) * std::ldexp(1.0, p.exp - 3), double(fmt::e4m3_to_float(uint8_t(code)))) << code;
  }
}

}  // namespace
}  // namespace symmoe::ref
