// Golden MoE layer: the direct per-token formula and the composed path dispatch(expand) -> expert MLP -> combine
// agree bitwise (kernel-faithful mode) over routings, masks, alignments and clamps; exact vs faithful error is
// within FP8 error; the expert MLP is row-independent; all-masked tokens give zeros.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/compare.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/reference/mlp.hpp"

namespace symmoe::ref {
namespace {

MoeShape small_shape(int ranks, int max_tokens) {
  MoeShape s;
  s.hidden = 256, s.intermediate = 128, s.num_experts = 8, s.num_topk = 3;
  s.num_ranks = ranks, s.num_max_tokens_per_rank = max_tokens;
  return s;
}

std::vector<MoeLayerInput> make_inputs(const MoeShape& shape, const RoutingOptions& options) {
  std::vector<MoeLayerInput> in;
  for (int r = 0; r < shape.num_ranks; ++r) {
    const int T = r == 1 ? shape.num_max_tokens_per_rank / 2 : shape.num_max_tokens_per_rank;
    in.push_back(make_random_layer_input(shape, T, options, r));
  }
  return in;
}

std::vector<Routing> routings_of(const std::vector<MoeLayerInput>& in) {
  std::vector<Routing> r;
  for (const auto& i : in) r.push_back(i.routing);
  return r;
}

TEST(ReferenceMlp, ComposedPathEqualsFormulaBitwise) {
  struct Case {
    int ranks, tokens, alignment;
    RoutingKind kind;
    double mask;
    float clamp;
  };
  const Case cases[] = {
      {1, 6, 1, RoutingKind::kUniform, 0.0, 0.f},     {2, 7, 4, RoutingKind::kZipf, 0.3, 0.f},
      {4, 5, 128, RoutingKind::kHotExpert, 0.2, 3.f}, {8, 3, 1, RoutingKind::kUniform, 0.5, 1.5f},
      {2, 9, 1, RoutingKind::kHotExpert, 0.0, 0.f},
  };
  uint64_t seed = 40;
  for (const auto& c : cases) {
    const MoeShape shape = small_shape(c.ranks, c.tokens);
    RoutingOptions o;
    o.kind = c.kind, o.mask_prob = c.mask, o.seed = ++seed, o.hot_expert = 5;
    auto inputs = make_inputs(shape, o);
    if (c.mask > 0)  // force one all-masked token
      for (int k = 0; k < shape.num_topk; ++k)
        inputs[0].routing.topk_idx[k] = -1, inputs[0].routing.topk_weights[k] = 0.f;
    const auto weights = make_random_experts(shape.hidden, shape.intermediate, routings_of(inputs), seed);
    const auto formula = moe_forward_faithful(shape, weights, inputs, c.clamp);
    const auto composed = moe_forward_composed(shape, weights, inputs, c.clamp, c.alignment);
    ASSERT_EQ(formula.size(), size_t(c.ranks));
    for (int r = 0; r < c.ranks; ++r)
      EXPECT_TRUE(test::bitwise_equal(formula[r], composed[r], "composed vs formula"))
          << "rank " << r << " case seed " << seed;
    if (c.mask > 0) {
      for (int col = 0; col < shape.hidden; ++col) ASSERT_EQ(formula[0][col], 0) << "all-masked token, col " << col;
    }
  }
}

TEST(ReferenceMlp, FaithfulIsWithinFp8ErrorOfExact) {
  const MoeShape shape = small_shape(2, 8);
  RoutingOptions o;
  o.seed = 3, o.mask_prob = 0.1;
  const auto inputs = make_inputs(shape, o);
  const auto weights = make_random_experts(shape.hidden, shape.intermediate, routings_of(inputs), 3);
  for (float clamp : {0.f, 2.f}) {
    const auto faithful = moe_forward_faithful(shape, weights, inputs, clamp);
    const auto exact = moe_forward_exact(shape, weights, inputs, clamp);
    std::vector<double> ref, got;
    for (int r = 0; r < shape.num_ranks; ++r) {
      ref.insert(ref.end(), exact[r].begin(), exact[r].end());
      for (const uint16_t b : faithful[r]) got.push_back(fmt::bf16_to_float(b));
    }
    const double err = test::rel_frobenius(ref, got);
    std::printf("[ measured ] faithful vs exact MoE layer, clamp %.1f: rel. Frobenius error %.3g\n", clamp, err);
    // NOTES: dominated by the e4m3 re-quantisation of the L1 output (the exact model keeps it in fp64): 3 mantissa
    // bits give a relative rounding error of rms 2^-3/sqrt(12) * sqrt(E[1/m^2]) ~ 0.036 * 0.74 ~ 0.027 for
    // log-uniform significands m, and W2 carries it to the output unchanged (measured 0.028). bf16 roundings
    // (2^-9) and fp32 sums add little. An error near 0 would mean the faithful path skipped quantisation.
    EXPECT_LT(err, 4e-2);
    EXPECT_GT(err, 1e-2);
  }
}

TEST(ReferenceMlp, ExpertMlpRowsAreIndependent) {
  const MoeShape shape = small_shape(1, 10);
  RoutingOptions o;
  o.seed = 11;
  const auto in = make_random_layer_input(shape, 10, o, 0);
  const auto w = make_random_expert(shape.hidden, shape.intermediate, 2, 11);
  std::vector<float> rw(10);
  for (int i = 0; i < 10; ++i) rw[i] = 0.1f * float(i + 1);
  const auto all = expert_mlp_faithful(in.x, 0, 10, w, rw, 0.f);
  for (int t = 0; t < 10; ++t) {
    const auto one = expert_mlp_faithful(in.x, t, t + 1, w, {rw[t]}, 0.f);
    ASSERT_TRUE(test::bitwise_equal(all.data() + size_t(t) * shape.hidden, one.data(), one.size(), "row")) << t;
  }
  // The exact MLP agrees with the faithful one within FP8 error, row by row.
  const auto exact = expert_mlp_exact(in.x, 0, 10, w, std::vector<double>(rw.begin(), rw.end()), 0.0);
  std::vector<double> got;
  for (const uint16_t b : all) got.push_back(fmt::bf16_to_float(b));
  EXPECT_LT(test::rel_frobenius(exact, got), 4e-2);
}

TEST(ReferenceMlp, MissingExpertWeightsRaiseNamedErrors) {
  const MoeShape shape = small_shape(2, 4);
  RoutingOptions o;
  o.seed = 1;
  const auto inputs = make_inputs(shape, o);
  ExpertWeightMap weights = make_random_experts(shape.hidden, shape.intermediate, routings_of(inputs), 1);
  const int missing = weights.begin()->first;
  weights.erase(weights.begin());
  try {
    moe_forward_faithful(shape, weights, inputs, 0.f);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no weights for expert " + std::to_string(missing)), std::string::npos);
  }
  auto bad = inputs;
  bad[1].x.num_cols = 128;
  EXPECT_THROW(moe_forward_composed(shape, weights, bad, 0.f), Error);
}

}  // namespace
}  // namespace symmoe::ref
