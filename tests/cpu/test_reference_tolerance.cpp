// The allowed device deviation from the faithful MoE model (include/symmoe/reference/tolerance.hpp): its y is the
// faithful model's, bitwise; an emulated device whose SwiGLU values differ by up to the assumed relative amount
// stays within the slack everywhere and is bitwise equal on tokens without fragile codes; a device that differs by
// more does not (the check can fail); the fragility predicates on hand-picked values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "common/compare.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/reference/gemm.hpp"
#include "symmoe/reference/tolerance.hpp"

namespace symmoe::ref {
namespace {

MoeShape shape_for_tolerance() {
  MoeShape s;
  s.hidden = 256, s.intermediate = 256, s.num_experts = 8, s.num_topk = 4;
  s.num_ranks = 1, s.num_max_tokens_per_rank = 12;
  return s;
}

// The faithful layer with every SwiGLU value multiplied by (1 + perturb) (alternating sign per lane): what a device
// whose expf differs from glibc's would compute, all else bit-identical.
std::vector<uint16_t> emulated_device(const MoeShape& shape, const ExpertWeightMap& weights, const MoeLayerInput& in,
                                      float clamp, double perturb) {
  const int H = shape.hidden, I = shape.intermediate, K = shape.num_topk;
  std::vector<uint16_t> y(size_t(in.x.num_rows) * H);
  for (int t = 0; t < in.x.num_rows; ++t) {
    std::vector<float> acc(H, 0.f);
    for (int k = 0; k < K; ++k) {
      const int64_t e = in.routing.topk_idx[size_t(t) * K + k];
      if (e < 0) continue;
      const ExpertWeights& w = weights.at(int(e));
      const float weight = in.routing.topk_weights[size_t(t) * K + k];
      const auto l1 = gemm_faithful(in.x, t, t + 1, w.w1);
      const double p = (t + k) % 2 ? perturb : -perturb;
      Fp8Activations hq;
      hq.num_rows = 1, hq.num_cols = I, hq.block = 128;
      hq.data.resize(I), hq.scales.resize(I / 128);
      for (int j = 0; j < I / 128; ++j) {
        float h[128], amax = 0.f;
        for (int c = 0; c < 128; ++c) {
          h[c] = float(double(swiglu_faithful(l1[j * 128 + c], l1[I + j * 128 + c], weight, clamp)) * (1 + p));
          amax = fmt::amax_update(amax, h[c]);
        }
        const float s = fmt::scale_for_amax(amax, fmt::kE4M3Max, fmt::ScaleFormat::kUe8m0);
        hq.scales[j] = s;
        for (int c = 0; c < 128; ++c) hq.data[j * 128 + c] = fmt::quantize_e4m3(h[c], s, fmt::ScaleFormat::kUe8m0);
      }
      const auto l2 = gemm_faithful(hq, w.w2);
      for (int c = 0; c < H; ++c) acc[c] += fmt::bf16_to_float(fmt::float_to_bf16(l2[c]));
    }
    for (int c = 0; c < H; ++c) y[size_t(t) * H + c] = fmt::float_to_bf16(acc[c]);
  }
  return y;
}

struct Outcome {
  size_t outside = 0, unbounded_differ = 0, differ = 0;
};

Outcome compare(const FaithfulWithSlack& model, const std::vector<uint16_t>& device) {
  Outcome o;
  for (size_t i = 0; i < device.size(); ++i) {
    const double d = std::fabs(double(fmt::bf16_to_float(device[i])) - double(fmt::bf16_to_float(model.y[i])));
    o.differ += device[i] != model.y[i];
    o.outside += !(d <= model.slack[i]);
    o.unbounded_differ += model.slack[i] == 0 && device[i] != model.y[i];
  }
  return o;
}

TEST(ReferenceTolerance, SlackCoversDeviceDifferencesWithinTheAssumedBound) {
  const MoeShape shape = shape_for_tolerance();
  for (const float clamp : {0.f, 2.f}) {
    RoutingOptions o;
    o.seed = 77 + uint64_t(clamp);
    o.mask_prob = 0.2;
    const auto in = make_random_layer_input(shape, shape.num_max_tokens_per_rank, o, 0);
    const auto weights = make_random_experts(shape.hidden, shape.intermediate, {in.routing}, o.seed);
    // A larger relative bound than kSwigluRelDiff makes fragile codes common enough to exercise the slack; the
    // derivation does not depend on its size.
    const double rel = 0x1p-11;
    const auto model = moe_forward_faithful_with_slack(shape, weights, {in}, clamp, rel)[0];
    EXPECT_TRUE(test::bitwise_equal(moe_forward_faithful(shape, weights, {in}, clamp)[0], model.y, "y vs faithful"));
    ASSERT_GT(model.num_fragile_codes, 0u) << "the test needs fragile codes";
    const Outcome within = compare(model, emulated_device(shape, weights, in, clamp, 0.9 * rel));
    std::printf(
        "[ measured ] clamp %g: %zu codes, %zu fragile, %zu fragile scales; emulated device: %zu of %zu "
        "values differ, %zu outside the slack\n",
        clamp, model.num_codes, model.num_fragile_codes, model.num_fragile_scales, within.differ, model.y.size(),
        within.outside);
    EXPECT_GT(within.differ, 0u) << "the perturbation should move some codes";
    EXPECT_EQ(within.outside, 0u);
    EXPECT_EQ(within.unbounded_differ, 0u) << "tokens without fragile codes must be bitwise equal";
    // 64x the assumed bound: codes the model does not flag move, and the check catches it.
    const Outcome beyond = compare(model, emulated_device(shape, weights, in, clamp, 64 * rel));
    EXPECT_GT(beyond.outside, 0u) << "a device beyond the assumed bound must fail the check";
  }
}

TEST(ReferenceTolerance, DefaultBoundFlagsFewCodes) {
  const MoeShape shape = shape_for_tolerance();
  RoutingOptions o;
  o.seed = 5;
  const auto in = make_random_layer_input(shape, 8, o, 0);
  const auto weights = make_random_experts(shape.hidden, shape.intermediate, {in.routing}, o.seed);
  const auto model = moe_forward_faithful_with_slack(shape, weights, {in}, 0.f)[0];
  // ~2 * 2^-19 / 2^-3.5 of the codes sit that close to a rounding midpoint: a few in 10^5.
  EXPECT_LE(double(model.num_fragile_codes), 1e-3 * double(model.num_codes));
  const Outcome self = compare(model, model.y);
  EXPECT_EQ(self.outside, 0u);
}

TEST(ReferenceTolerance, FragilityPredicates) {
  // e4m3 values 1.0 and 1.125: the midpoint 1.0625 is fragile at any relative margin, 1.0 and 1.03 are not at 2^-19.
  EXPECT_TRUE(e4m3_code_is_fragile(1.0625f, kSwigluRelDiff));
  EXPECT_TRUE(e4m3_code_is_fragile(1.0625f * (1 + 0x1p-21f), kSwigluRelDiff));
  EXPECT_FALSE(e4m3_code_is_fragile(1.0f, kSwigluRelDiff));
  EXPECT_FALSE(e4m3_code_is_fragile(1.03f, kSwigluRelDiff));
  EXPECT_TRUE(e4m3_code_is_fragile(-1.0625f, kSwigluRelDiff));
  // Subnormal spacing 2^-9: midpoint 1.5 * 2^-9.
  EXPECT_TRUE(e4m3_code_is_fragile(0x1.8p-9f, kSwigluRelDiff));
  // Scale: amax / 448 at a power of two (amax = 448 -> scale 1 or 2) is fragile; 300 is not.
  EXPECT_TRUE(ue8m0_scale_is_fragile(448.f, kSwigluRelDiff));
  EXPECT_TRUE(ue8m0_scale_is_fragile(224.f * (1 + 0x1p-22f), kSwigluRelDiff));
  EXPECT_FALSE(ue8m0_scale_is_fragile(300.f, kSwigluRelDiff));
}

}  // namespace
}  // namespace symmoe::ref
