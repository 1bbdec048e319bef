// FP4 golden model: the fold (exact round trip, base rule, refusals), the exact FP4 GEMM against an fp64 loop
// written here from the E2M1 table and scale codes, the faithful FP4 GEMM against the faithful FP8 GEMM on weights
// folded independently here (bitwise), and the FP4 expert MLP.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "symmoe/common.hpp"
#include "symmoe/fp4_fold.hpp"
#include "symmoe/reference/fp4.hpp"
#include "symmoe/reference/gemm.hpp"

namespace symmoe::ref {
namespace {

const double kE2m1Table[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

double e2m1_value(uint8_t nibble) { return (nibble & 8) ? -kE2m1Table[nibble & 7] : kE2m1Table[nibble & 7]; }

uint8_t nibble_at(const Fp4Weights& w, int r, int c) {
  const uint8_t byte = w.data[(size_t(r) * w.num_cols + c) / 2];
  return (c & 1) ? uint8_t(byte >> 4) : uint8_t(byte & 0xF);
}

double fp4_value(const Fp4Weights& w, int r, int c) {
  return std::ldexp(e2m1_value(nibble_at(w, r, c)), int(w.scales_ue8m0[size_t(r) * (w.num_cols / 32) + c / 32]) - 127);
}

// Random nibbles (all 16 codes) and scale codes uniform in [lo, hi].
Fp4Weights random_fp4(int N, int K, int lo, int hi, std::mt19937_64& rng) {
  Fp4Weights w;
  w.num_rows = N, w.num_cols = K;
  w.data.resize(size_t(N) * K / 2);
  for (auto& b : w.data) b = uint8_t(rng());
  w.scales_ue8m0.resize(size_t(N) * (K / 32));
  for (auto& s : w.scales_ue8m0) s = uint8_t(lo + int(rng() % uint64_t(hi - lo + 1)));
  return w;
}

Fp8Activations random_activations(int M, int K, std::mt19937_64& rng) {
  Fp8Activations a;
  a.num_rows = M, a.num_cols = K, a.block = 128;
  a.data.resize(size_t(M) * K);
  for (auto& c : a.data) {
    do c = uint8_t(rng());
    while ((c & 0x7f) == 0x7f);
  }
  a.scales.resize(size_t(M) * (K / 128));
  for (auto& s : a.scales) s = float(0.01 + 0.03 * double(rng() >> 11) * 0x1.0p-53);
  return a;
}

// The fold as the spec in fp4_fold.hpp reads, written out here: base = max(max code - 6, 1) per 128x128 block.
Fp8BlockWeights fold_here(const Fp4Weights& w) {
  const int N = w.num_rows, K = w.num_cols;
  Fp8BlockWeights f;
  f.num_rows = N, f.num_cols = K;
  f.data.resize(size_t(N) * K);
  f.scales.resize(size_t(N / 128) * (K / 128));
  for (int bi = 0; bi < N / 128; ++bi)
    for (int bj = 0; bj < K / 128; ++bj) {
      int hi = 0;
      for (int r = 128 * bi; r < 128 * bi + 128; ++r)
        for (int j = 4 * bj; j < 4 * bj + 4; ++j) hi = std::max(hi, int(w.scales_ue8m0[size_t(r) * (K / 32) + j]));
      const int base = std::max(hi - 6, 1);
      f.scales[size_t(bi) * (K / 128) + bj] = float(std::ldexp(1.0, base - 127));
      for (int r = 128 * bi; r < 128 * bi + 128; ++r)
        for (int c = 128 * bj; c < 128 * bj + 128; ++c) {
          const int code = w.scales_ue8m0[size_t(r) * (K / 32) + c / 32];
          const double v = std::ldexp(e2m1_value(nibble_at(w, r, c)), code - base);
          f.data[size_t(r) * K + c] = fmt::float_to_e4m3(float(v));
        }
    }
  return f;
}

std::string error_of(const auto& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Fp4Fold, RoundTripIsExactOverTheWholeRange) {
  std::mt19937_64 rng(1);
  // Codes spanning exactly 14 binades in every block (the widest accepted), plus a block at the bottom of UE8M0.
  for (const auto& [lo, hi] : {std::pair{100, 114}, std::pair{120, 127}, std::pair{127, 127}, std::pair{0, 5}}) {
    Fp4Weights w = random_fp4(256, 256, lo, hi, rng);
    const Fp8BlockWeights f = fold_fp4_weights(w);
    for (int r = 0; r < 256; ++r)
      for (int c = 0; c < 256; ++c) {
        const double folded = double(fmt::e4m3_to_float(f.data[size_t(r) * 256 + c])) * double(f.scale(r, c));
        ASSERT_EQ(folded, fp4_value(w, r, c)) << "lo " << lo << " hi " << hi << " row " << r << " col " << c;
      }
    const Fp8BlockWeights here = fold_here(w);
    EXPECT_EQ(f.data, here.data) << lo << ".." << hi;
    EXPECT_EQ(f.scales, here.scales) << lo << ".." << hi;
  }
}

TEST(Fp4Fold, BaseRule) {
  EXPECT_EQ(fp4_fold_base_code(127), 121);
  EXPECT_EQ(fp4_fold_base_code(7), 1);
  EXPECT_EQ(fp4_fold_base_code(3), 1);  // clamped: the base stays a normal fp32
  std::mt19937_64 rng(2);
  Fp4Weights w = random_fp4(128, 128, 127, 127, rng);
  w.scales_ue8m0[5 * 4 + 2] = 130;  // the block's max
  const Fp8BlockWeights f = fold_fp4_weights(w);
  EXPECT_EQ(f.scales[0], std::ldexp(1.0f, 130 - 6 - 127));
}

TEST(Fp4Fold, RefusesScalesOutsideTheExactRangeAndNaN) {
  std::mt19937_64 rng(3);
  Fp4Weights w = random_fp4(256, 256, 120, 120, rng);
  uint8_t& code = w.scales_ue8m0[size_t(130) * 8 + 6];  // row 130, 32-column block 6: 128x128 block (1, 1)
  code = 134;                                           // base 128: 120 - 128 = -8, the lowest exact shift
  EXPECT_NO_THROW(fold_fp4_weights(w));
  code = 135;  // base 129: 120 - 129 = -9
  const std::string msg = error_of([&] { fold_fp4_weights(w, "l1 weights"); });
  EXPECT_NE(msg.find("l1 weights"), std::string::npos) << msg;
  EXPECT_NE(msg.find("scale code 120"), std::string::npos) << msg;
  EXPECT_NE(msg.find("largest code 135"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(1, 1)"), std::string::npos) << msg;
  float bases[4] = {-1, -1, -1, -1};
  EXPECT_THROW(fp4_fold_bases(w.scales_ue8m0.data(), 256, 256, "s", bases), Error);
  for (const float b : bases) EXPECT_EQ(b, -1.f);  // nothing written
  code = 0xFF;
  EXPECT_NE(error_of([&] { fold_fp4_weights(w); }).find("NaN"), std::string::npos);
  w = random_fp4(200, 256, 120, 120, rng);
  EXPECT_NE(error_of([&] { fold_fp4_weights(w, "w2"); }).find("rows must be a positive multiple of 128"),
            std::string::npos);
}

TEST(Fp4Gemm, ExactMatchesAnFp64LoopOverE2m1AndScales) {
  std::mt19937_64 rng(4);
  const int M = 7, N = 256, K = 384;
  const Fp8Activations a = random_activations(M, K, rng);
  const Fp4Weights b = random_fp4(N, K, 115, 129, rng);
  const std::vector<double> d = gemm_exact(a, b);
  const std::vector<double> d_folded = gemm_exact(a, fold_fp4_weights(b));
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double want = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double av =
            double(fmt::e4m3_to_float(a.data[size_t(m) * K + k])) * double(a.scales[size_t(m) * 3 + k / 128]);
        want += av * fp4_value(b, n, k);
        mag += std::abs(av * fp4_value(b, n, k));
      }
      ASSERT_NEAR(d[size_t(m) * N + n], want, 1e-13 * mag) << m << ", " << n;
      ASSERT_NEAR(d_folded[size_t(m) * N + n], want, 1e-13 * mag) << m << ", " << n;
    }
}

TEST(Fp4Gemm, FaithfulIsTheFaithfulFp8GemmOnTheFoldedWeights) {
  std::mt19937_64 rng(5);
  const int M = 9, N = 256, K = 512;
  const Fp8Activations a = random_activations(M, K, rng);
  const Fp4Weights b = random_fp4(N, K, 108, 122, rng);
  const std::vector<float> f = gemm_faithful(a, b);
  const std::vector<float> f8 = gemm_faithful(a, fold_here(b));
  ASSERT_EQ(f.size(), f8.size());
  for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(fmt::float_as_bits(f[i]), fmt::float_as_bits(f8[i])) << i;
  const std::vector<double> e = gemm_exact(a, b);
  double scale = 0;
  for (const double v : e) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(double(f[i]), e[i], 1e-3 * scale) << i;
}

TEST(Fp4Mlp, FaithfulAndExactAgreeAndUseTheFold) {
  const int H = 256, I = 128, M = 5;
  const ExpertWeightsFp4 w = make_random_expert_fp4(H, I, 3, 7);
  std::mt19937_64 rng(6);
  const Fp8Activations x = random_activations(M, H, rng);
  const std::vector<float> wf = {0.5f, 1.f, 0.25f, 0.75f, 1.f};
  const std::vector<double> wd(wf.begin(), wf.end());
  const std::vector<uint16_t> f = expert_mlp_faithful(x, 0, M, w, wf, 0.f);
  EXPECT_EQ(f, expert_mlp_faithful(x, 0, M, fold_expert_fp4(w), wf, 0.f));
  const std::vector<double> e = expert_mlp_exact(x, 0, M, w, wd, 0.0);
  double scale = 0;
  for (const double v : e) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 0.0);
  for (size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(double(fmt::bf16_to_float(f[i])), e[i], 0.05 * scale) << i;
}

}  // namespace
}  // namespace symmoe::ref

namespace symmoe::ref {
namespace {

TEST(Fp4Moe, ComposedEqualsFormulaAndFaithfulIsNearExact) {
  MoeShape shape;
  shape.hidden = 256, shape.intermediate = 128, shape.num_experts = 8, shape.num_topk = 3;
  shape.num_ranks = 2, shape.num_max_tokens_per_rank = 6;
  RoutingOptions o;
  o.seed = 21, o.mask_prob = 0.2;
  std::vector<MoeLayerInput> inputs;
  std::vector<Routing> routings;
  for (int r = 0; r < shape.num_ranks; ++r) {
    inputs.push_back(make_random_layer_input(shape, 6 - r, o, r));
    routings.push_back(inputs.back().routing);
  }
  const ExpertWeightMap folded =
      fold_experts_fp4(make_random_experts_fp4(shape.hidden, shape.intermediate, routings, 5));
  const auto formula = moe_forward_faithful(shape, folded, inputs, 0.f);
  const auto composed = moe_forward_composed(shape, folded, inputs, 0.f, 4);
  const auto exact = moe_forward_exact(shape, folded, inputs, 0.0);
  double num = 0, den = 0;
  for (int r = 0; r < shape.num_ranks; ++r) {
    EXPECT_EQ(formula[r], composed[r]) << "rank " << r;
    for (size_t i = 0; i < exact[r].size(); ++i) {
      const double d = double(fmt::bf16_to_float(formula[r][i])) - exact[r][i];
      num += d * d, den += exact[r][i] * exact[r][i];
    }
  }
  ASSERT_GT(den, 0.0);
  EXPECT_LT(std::sqrt(num / den), 4e-2);  // the e4m3 re-quantisation of the L1 output, as for FP8 weights
  EXPECT_GT(std::sqrt(num / den), 1e-2);
}

TEST(Fp4Moe, FoldingAMapNamesTheExpert) {
  ExpertWeightMapFp4 map;
  map[6] = make_random_expert_fp4(256, 128, 6, 1);
  map[6].w2.scales_ue8m0[0] = 0xFF;
  try {
    fold_experts_fp4(map);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expert 6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("w2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace symmoe::ref
