// Host side of the composed MoE layer (no GPU): forward-argument and option checks raise symmoe::Error naming rank
// and field before anything is launched; the synthetic weight generator is deterministic, distinct per expert and
// matrix, has the intended variance (~1/fan_in), and gives the golden model a sane layer (faithful vs exact ~0.03).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "symmoe/moe.hpp"
#include "symmoe/moe_weights.hpp"
#include "symmoe/reference/dispatch.hpp"
#include "common/compare.hpp"

namespace symmoe {
namespace {

using test::error_of;

const void* fake(uintptr_t addr) { return reinterpret_cast<const void*>(addr); }

MoeForwardArgs good_args(int T) {
  MoeForwardArgs a;
  a.num_tokens = T;
  a.x = static_cast<const uint8_t*>(fake(0x10000));
  a.x_scales = static_cast<const float*>(fake(0x20000));
  a.topk_idx = static_cast<const int64_t*>(fake(0x30000));
  a.topk_weights = static_cast<const float*>(fake(0x40000));
  return a;
}

TEST(MoeHostChecks, ForwardArguments) {
  const MoeShape s = named_shape("flash", 2, 64);
  EXPECT_EQ(error_of([&] { check_forward_args(s, 1, good_args(64)); }), "");
  EXPECT_EQ(error_of([&] { check_forward_args(s, 1, MoeForwardArgs{}); }), "") << "no tokens: no pointers needed";
  std::string e = error_of([&] { check_forward_args(s, 1, good_args(65)); });
  EXPECT_NE(e.find("rank 1"), std::string::npos) << e;
  EXPECT_NE(e.find("num_tokens 65"), std::string::npos) << e;
  auto a = good_args(8);
  a.x = nullptr;
  EXPECT_NE(error_of([&] { check_forward_args(s, 0, a); }).find("x must be"), std::string::npos);
  a = good_args(8);
  a.x_scales = static_cast<const float*>(fake(0x20002));
  EXPECT_NE(error_of([&] { check_forward_args(s, 0, a); }).find("x_scales"), std::string::npos);
  a = good_args(8);
  a.topk_idx = static_cast<const int64_t*>(fake(0x30004));
  EXPECT_NE(error_of([&] { check_forward_args(s, 0, a); }).find("topk_idx"), std::string::npos);
  a = good_args(8);
  a.topk_weights = nullptr;
  EXPECT_NE(error_of([&] { check_forward_args(s, 0, a); }).find("topk_weights"), std::string::npos);
  a = good_args(8);
  a.y = static_cast<uint16_t*>(const_cast<void*>(fake(0x50002)));
  EXPECT_NE(error_of([&] { check_forward_args(s, 0, a); }).find("y must be"), std::string::npos);
}

TEST(MoeHostChecks, Options) {
  ComposedMoeOptions o;
  EXPECT_EQ(error_of([&] { check_options(o); }), "");
  o.expert_alignment = 0;
  EXPECT_NE(error_of([&] { check_options(o); }).find("expert_alignment"), std::string::npos);
  o.expert_alignment = 2048;
  EXPECT_NE(error_of([&] { check_options(o); }).find("expert_alignment"), std::string::npos);
  o = {};
  o.gemm_sms = -1;
  EXPECT_NE(error_of([&] { check_options(o); }).find("gemm_sms"), std::string::npos);
}

TEST(MoeSyntheticWeights, DeterministicDistinctAndScaled) {
  const int H = 256, I = 128;
  const auto a = synthetic::host_expert(H, I, 5, 77), b = synthetic::host_expert(H, I, 5, 77);
  EXPECT_EQ(a.w1.data, b.w1.data);
  EXPECT_EQ(a.w1.scales, b.w1.scales);
  EXPECT_EQ(a.w2.data, b.w2.data);
  const auto c = synthetic::host_expert(H, I, 6, 77), d = synthetic::host_expert(H, I, 5, 78);
  EXPECT_NE(a.w1.data, c.w1.data);
  EXPECT_NE(a.w1.data, d.w1.data);
  EXPECT_EQ(a.w1.num_rows, 2 * I);
  EXPECT_EQ(a.w1.num_cols, H);
  EXPECT_EQ(a.w2.num_rows, H);
  EXPECT_EQ(a.w2.num_cols, I);
  ASSERT_EQ(a.w1.scales.size(), size_t(2 * I / 128) * (H / 128));
  ASSERT_EQ(a.w2.scales.size(), size_t(H / 128) * (I / 128));
  // Codes are e4m3(448 u), u uniform in [-1, 1): E[(code/448)^2] = 1/3 (up to e4m3 rounding). Block scales are
  // sqrt(3/fan_in)/448 * [0.5, 1.5), so a weight has variance ~(13/12)/fan_in.
  double s1 = 0;
  size_t nan_codes = 0;
  for (uint8_t q : a.w1.data) {
    const double v = fmt::e4m3_to_float(q) / 448.0;
    s1 += v * v;
    nan_codes += (q & 0x7F) == 0x7F;
  }
  EXPECT_EQ(nan_codes, 0u);
  EXPECT_NEAR(s1 / double(a.w1.data.size()), 1.0 / 3.0, 0.02) << "second moment of the W1 codes / 448";
  const float f1 = synthetic::fan_in_scale(H), f2 = synthetic::fan_in_scale(I);
  for (float sc : a.w1.scales) EXPECT_TRUE(sc >= 0.5f * f1 && sc < 1.5f * f1) << sc;
  for (float sc : a.w2.scales) EXPECT_TRUE(sc >= 0.5f * f2 && sc < 1.5f * f2) << sc;
  EXPECT_NE(a.w1.scales[0], a.w1.scales[1]) << "blocks get their own scales";
}

TEST(MoeSyntheticWeights, GoldenModelLayerIsSane) {
  MoeShape s;
  s.hidden = 256, s.intermediate = 128, s.num_experts = 8, s.num_topk = 3, s.num_ranks = 2;
  s.num_max_tokens_per_rank = 4;
  ref::RoutingOptions ro;
  ro.seed = 9;
  std::vector<ref::MoeLayerInput> in;
  std::vector<ref::Routing> routings;
  for (int r = 0; r < 2; ++r) {
    in.push_back(ref::make_random_layer_input(s, 4, ro, r));
    routings.push_back(in.back().routing);
  }
  const auto w = synthetic::host_experts(s.hidden, s.intermediate, routings, 3, 2);
  for (const auto& [e, ew] : w) {
    const auto again = synthetic::host_expert(s.hidden, s.intermediate, e, 3);
    EXPECT_EQ(ew.w2.data, again.w2.data) << "threaded generation equals the single-expert one, expert " << e;
  }
  const auto f = ref::moe_forward_faithful(s, w, in, 0.f);
  const auto x = ref::moe_forward_exact(s, w, in, 0.f);
  double num = 0, den = 0;
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < x[r].size(); ++i) {
      const double d = double(fmt::bf16_to_float(f[r][i])) - x[r][i];
      num += d * d, den += x[r][i] * x[r][i];
    }
  ASSERT_GT(den, 0);
  EXPECT_LT(std::sqrt(num / den), 0.06);
}

// The glue kernel (src/kernels/moe/expand_glue.cu) derives the GEMM's segment starts from EP's expand metadata:
// start_e = psum_num_recv_tokens_per_expert[e] - num_unaligned[e], end = num_expanded_tokens. Checked on the golden
// dispatch (the EP kernels equal it bitwise), over alignments and masked lanes.
TEST(MoeGlue, SegmentStartsFromExpandMetadata) {
  for (const int alignment : {1, 64, 128}) {
    MoeShape s;
    s.hidden = 256, s.intermediate = 128, s.num_experts = 16, s.num_topk = 4, s.num_ranks = 4;
    s.num_max_tokens_per_rank = 9;
    ref::RoutingOptions ro;
    ro.seed = 11 + alignment, ro.mask_prob = 0.3, ro.kind = ref::RoutingKind::kZipf;
    std::vector<ref::DispatchInput> inputs;
    for (int r = 0; r < s.num_ranks; ++r)
      inputs.push_back(ref::make_dispatch_input(ref::make_random_layer_input(s, 9 - r, ro, r)));
    ref::DispatchConfig c;
    c.num_ranks = s.num_ranks, c.num_experts = s.num_experts, c.num_topk = s.num_topk;
    c.num_max_tokens_per_rank = s.num_max_tokens_per_rank, c.expert_alignment = alignment, c.do_expand = true;
    const auto out = ref::dispatch(c, inputs);
    for (const auto& o : out) {
      const ref::EpHandle& h = o.handle;
      for (int e = 0; e < h.num_local_experts(); ++e)
        EXPECT_EQ(h.psum_num_recv_tokens_per_expert[e] - h.num_unaligned_recv_tokens_per_expert[e], h.expert_start(e))
            << "rank " << h.rank << " expert " << e << " alignment " << alignment;
      const int El = h.num_local_experts();
      EXPECT_EQ(h.expert_start(El - 1) + h.num_recv_tokens_per_expert_list[El - 1], h.num_expanded_tokens);
    }
  }
}

}  // namespace
}  // namespace symmoe
