// Golden dispatch: metadata invariants over a sweep of random routings, cached dispatch, hand-worked example,
// routing generators, and bad-input errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "test_reference_util.hpp"

namespace symmoe::ref {
namespace {

using testing::config_of;
using testing::handles_equal;
using testing::handles_of;
using testing::make_inputs;
using testing::routing_sweep;

constexpr int kHidden = 8;

TEST(ReferenceDispatch, InvariantsHoldOverRoutingSweep) {
  int num_cases = 0, num_expanded_padding = 0, num_all_masked = 0;
  for (const auto& c : routing_sweep()) {
    SCOPED_TRACE(c.name());
    const auto inputs = make_inputs(c, kHidden);
    const auto config = config_of(c);
    const auto out = dispatch(config, inputs);
    const std::string problems = check_dispatch(config, inputs, out);
    ASSERT_EQ(problems, "") << problems;
    // Each routed (token, rank) pair appears exactly once among the received rows, found by its global index.
    for (int s = 0; s < c.num_ranks; ++s)
      for (int t = 0; t < inputs[s].num_tokens; ++t) {
        std::set<int> ranks;
        for (int k = 0; k < c.num_topk; ++k)
          if (inputs[s].topk_idx[size_t(t) * c.num_topk + k] >= 0)
            ranks.insert(int(inputs[s].topk_idx[size_t(t) * c.num_topk + k] / (c.num_experts / c.num_ranks)));
        num_all_masked += ranks.empty();
        for (int d = 0; d < c.num_ranks; ++d) {
          const auto& h = out[d].handle;
          int seen = 0;
          for (int i = 0; i < h.num_recv_tokens; ++i)
            seen += h.recv_src_metadata[size_t(i) * (2 + c.num_topk)] == s * c.num_max_tokens + t;
          ASSERT_EQ(seen, int(ranks.count(d))) << "rank " << s << " token " << t << " on rank " << d;
        }
      }
    for (const auto& o : out) num_expanded_padding += o.handle.num_expanded_tokens - o.handle.num_recv_tokens > 0;
    ++num_cases;
  }
  EXPECT_EQ(num_cases, 4 * 3 * 3 * 3 * 2);
  EXPECT_GT(num_all_masked, 10);  // the sweep does exercise all-masked tokens
  EXPECT_GT(num_expanded_padding, 10);
}

TEST(ReferenceDispatch, CachedDispatchReproducesHandleAndOutputsBitwise) {
  for (const auto& c : routing_sweep()) {
    SCOPED_TRACE(c.name());
    const auto inputs = make_inputs(c, kHidden);
    const auto fresh = dispatch(config_of(c), inputs);
    const auto cached = dispatch_cached(handles_of(fresh), inputs, c.zero_padding);
    for (int d = 0; d < c.num_ranks; ++d) {
      ASSERT_TRUE(handles_equal(fresh[d].handle, cached[d].handle)) << "rank " << d;
      ASSERT_TRUE(test::bitwise_equal(fresh[d].recv_x, cached[d].recv_x, "recv_x")) << "rank " << d;
      ASSERT_TRUE(test::bitwise_equal(fresh[d].recv_sf, cached[d].recv_sf, "recv_sf")) << "rank " << d;
      ASSERT_TRUE(test::bitwise_equal(fresh[d].recv_topk_idx, cached[d].recv_topk_idx, "recv_topk_idx"));
      ASSERT_TRUE(test::bitwise_equal(fresh[d].recv_topk_weights, cached[d].recv_topk_weights, "recv_topk_weights"));
    }
    // New x through the same handle: every received row is the new row of its source token.
    auto new_inputs = inputs;
    for (auto& in : new_inputs)
      for (auto& b : in.x) b = uint8_t(b ^ 0x3C);
    const auto again = dispatch_cached(handles_of(fresh), new_inputs, c.zero_padding);
    ASSERT_EQ(check_dispatch(config_of(c), new_inputs, again), "");
  }
}

// Hand-worked: R=2, E=4 (El=2), K=3, T_max=4, alignment 2. Rank 0 tokens:
//   t0: experts {3, 0, 1}   -> rank 1 (lane 0), rank 0 (lanes 1, 2; master 2)
//   t1: experts {-1, 2, -1} -> rank 1 (lane 1)
//   t2: experts {1, 3, 2}   -> rank 0 (lane 0), rank 1 (lanes 1, 2; master 2)
// Rank 1 tokens: t0: {0, -1, -1} -> rank 0 (lane 0); t1: all masked.
TEST(ReferenceDispatch, HandWorkedExample) {
  DispatchConfig config;
  config.num_ranks = 2, config.num_experts = 4, config.num_topk = 3, config.num_max_tokens_per_rank = 4;
  config.expert_alignment = 2;
  std::vector<DispatchInput> in(2);
  in[0].num_tokens = 3, in[0].topk_idx = {3, 0, 1, -1, 2, -1, 1, 3, 2};
  in[1].num_tokens = 2, in[1].topk_idx = {0, -1, -1, -1, -1, -1};
  for (int s = 0; s < 2; ++s) {
    in[s].x_row_bytes = 1;
    for (int t = 0; t < in[s].num_tokens; ++t) in[s].x.push_back(uint8_t(10 * s + t));
    in[s].topk_weights.assign(in[s].topk_idx.size(), 0.5f);
  }
  for (bool expand : {false, true}) {
    config.do_expand = expand;
    const auto out = dispatch(config, in);
    ASSERT_EQ(check_dispatch(config, in, out), "");
    EXPECT_EQ(out[0].handle.dst_buffer_slot_idx, (std::vector<int32_t>{0, -1, 0, -1, 1, -1, 1, -1, 2}));
    EXPECT_EQ(out[1].handle.dst_buffer_slot_idx, (std::vector<int32_t>{4, -1, -1, -1, -1, -1}));
    EXPECT_EQ(out[0].handle.num_tokens_per_rank, (std::vector<int32_t>{2, 3}));
    EXPECT_EQ(out[0].handle.num_tokens_per_expert, (std::vector<int32_t>{1, 2, 2, 2}));
    // Rank 0 receives rank 0's t0, t2 then rank 1's t0; rank 1 receives rank 0's t0, t1, t2.
    EXPECT_EQ(out[0].handle.psum_num_recv_tokens_per_rank, (std::vector<int32_t>{2, 3}));
    EXPECT_EQ(out[1].handle.psum_num_recv_tokens_per_rank, (std::vector<int32_t>{3, 3}));
    EXPECT_EQ(out[0].handle.num_unaligned_recv_tokens_per_expert, (std::vector<int32_t>{2, 2}));  // e0: r0t0, r1t0
    EXPECT_EQ(out[1].handle.num_unaligned_recv_tokens_per_expert, (std::vector<int32_t>{2, 2}));  // e2: t1,t2 e3: t0,t2
    EXPECT_EQ(out[1].handle.num_recv_tokens_per_expert_list, (std::vector<int32_t>{2, 2}));
    EXPECT_EQ(out[1].handle.num_expanded_tokens, 4);
    const std::vector<int32_t> meta0_head = {0, 2, -1, expand ? 0 : -1, expand ? 2 : -1};  // r0 t0: lanes 1,2 here
    EXPECT_EQ(
        std::vector<int32_t>(out[0].handle.recv_src_metadata.begin(), out[0].handle.recv_src_metadata.begin() + 5),
        meta0_head);
    if (!expand) {
      EXPECT_EQ(out[0].recv_x, (std::vector<uint8_t>{0, 2, 10}));
      EXPECT_EQ(out[0].handle.psum_num_recv_tokens_per_expert, (std::vector<int32_t>{2, 4}));
      EXPECT_EQ(out[0].recv_topk_idx, (std::vector<int64_t>{-1, 0, 1, 1, -1, -1, 0, -1, -1}));
    } else {
      // Rank 0: e0 rows [r0t0, r1t0], e1 rows [r0t0, r0t2]; rank 1: e2 [r0t1, r0t2], e3 [r0t0, r0t2].
      EXPECT_EQ(out[0].recv_x, (std::vector<uint8_t>{0, 10, 0, 2}));
      EXPECT_EQ(out[1].recv_x, (std::vector<uint8_t>{1, 2, 0, 2}));
      EXPECT_EQ(out[0].handle.psum_num_recv_tokens_per_expert, (std::vector<int32_t>{2, 4}));
      EXPECT_EQ(out[0].recv_topk_idx, (std::vector<int64_t>{0, 0, 1, 1}));
    }
  }
  // Alignment 4 in expand mode: segments start at 0 and 4, padding rows zero, psum = start + unaligned.
  config.expert_alignment = 4, config.do_expand = true;
  const auto out = dispatch(config, in);
  ASSERT_EQ(check_dispatch(config, in, out), "");
  EXPECT_EQ(out[0].handle.psum_num_recv_tokens_per_expert, (std::vector<int32_t>{2, 6}));
  EXPECT_EQ(out[0].recv_x, (std::vector<uint8_t>{0, 10, 0, 0, 0, 2, 0, 0}));
  EXPECT_EQ(out[0].recv_topk_idx, (std::vector<int64_t>{0, 0, -1, -1, 1, 1, -1, -1}));
}

TEST(ReferenceDispatch, CheckerCatchesCorruptedMetadata) {
  testing::RoutingCase c{3, 6, 2, 5, 4, {}, true, true};
  c.options.seed = 9;
  const auto inputs = make_inputs(c, kHidden);
  const auto good = dispatch(config_of(c), inputs);
  ASSERT_EQ(check_dispatch(config_of(c), inputs, good), "");
  auto bad = good;
  std::swap(bad[1].recv_x[0], bad[1].recv_x[kHidden * 2]);  // two rows' first bytes
  if (bad[1].recv_x != good[1].recv_x) {
    EXPECT_NE(check_dispatch(config_of(c), inputs, bad), "");
  }
  bad = good;
  bad[0].handle.recv_src_metadata[0] += 1;
  EXPECT_NE(check_dispatch(config_of(c), inputs, bad), "");
  bad = good;
  bad[2].handle.psum_num_recv_tokens_per_expert[0] += 1;
  EXPECT_NE(check_dispatch(config_of(c), inputs, bad), "");
}

TEST(ReferenceRouting, GeneratorsAreDeterministicDistinctAndShaped) {
  RoutingOptions o;
  o.seed = 5;
  for (RoutingKind kind : {RoutingKind::kUniform, RoutingKind::kZipf, RoutingKind::kHotExpert}) {
    o.kind = kind, o.hot_expert = 7, o.hot_fraction = 0.6, o.mask_prob = 0.1;
    const Routing a = make_routing(2000, 64, 6, o, 3), b = make_routing(2000, 64, 6, o, 3);
    EXPECT_EQ(a.topk_idx, b.topk_idx);
    EXPECT_EQ(a.topk_weights, b.topk_weights);
    EXPECT_NE(a.topk_idx, make_routing(2000, 64, 6, o, 4).topk_idx);  // ranks differ
    int masked = 0;
    for (int t = 0; t < 2000; ++t) {
      double sum = 0;
      std::set<int64_t> seen;
      for (int k = 0; k < 6; ++k) {
        const int64_t e = a.topk_idx[t * 6 + k];
        const float w = a.topk_weights[t * 6 + k];
        if (e < 0) {
          EXPECT_EQ(w, 0.f);
          ++masked;
          continue;
        }
        EXPECT_TRUE(seen.insert(e).second) << "duplicate expert in token " << t;
        EXPECT_GT(w, 0.f);
        sum += w;
      }
      if (!seen.empty()) {
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
    EXPECT_NEAR(masked / 12000.0, 0.1, 0.02);
    const auto count = count_pairs_per_expert({a}, 64);
    const int max_count = *std::max_element(count.begin(), count.end());
    if (kind == RoutingKind::kUniform) {
      EXPECT_LT(max_count, 300);  // mean 2000*6*0.9/64 ~ 169
    } else if (kind == RoutingKind::kZipf) {
      EXPECT_GT(max_count, 600);  // the most popular expert dominates
    } else {
      EXPECT_NEAR(count[7], 2000 * 0.6 * 0.9, 80);
    }
  }
  EXPECT_EQ(parse_routing_kind("zipf"), RoutingKind::kZipf);
  EXPECT_THROW(parse_routing_kind("zip"), Error);
  EXPECT_THROW(make_routing(4, 4, 5, o, 0), Error);
}

// The error message must name rank, token, lane and value.
void expect_error(const DispatchConfig& c, const std::vector<DispatchInput>& in,
                  const std::vector<std::string>& parts) {
  try {
    dispatch(c, in);
    ADD_FAILURE() << "expected symmoe::Error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(ReferenceDispatch, BadInputRaisesNamedErrors) {
  testing::RoutingCase c{2, 8, 3, 4, 1, {}, false, true};
  const auto good = make_inputs(c, kHidden);
  const auto config = config_of(c);
  auto in = good;
  in[1].topk_idx[1 * 3 + 2] = 8;
  expect_error(config, in, {"rank 1", "token 1", "lane 2", "expert id 8"});
  in = good;
  in[0].topk_idx[2 * 3 + 1] = -2;
  expect_error(config, in, {"rank 0", "token 2", "lane 1", "-2"});
  in = good;
  in[0].topk_idx[3 * 3 + 2] = in[0].topk_idx[3 * 3 + 0] >= 0 ? in[0].topk_idx[3 * 3 + 0] : 5;
  in[0].topk_idx[3 * 3 + 0] = in[0].topk_idx[3 * 3 + 2];
  expect_error(config, in, {"rank 0", "token 3", "lane 2", "duplicates lane 0"});
  in = good;
  in[0].num_tokens = 5;
  expect_error(config, in, {"rank 0", "num_tokens 5"});
  in = good;
  in[1].x_row_bytes += 2;
  expect_error(config, in, {"rank 1", "x rows"});
  auto odd = config;
  odd.num_experts = 7;
  expect_error(odd, good, {"num_experts (7)", "num_ranks (2)"});
  in = good;
  in[1].topk_weights.pop_back();
  expect_error(config, in, {"rank 1", "topk_weights"});
  // Cached dispatch refuses a different routing.
  const auto out = dispatch(config, good);
  in = good;
  std::swap(in[0].topk_idx[0], in[0].topk_idx[1]);
  if (in[0].topk_idx != good[0].topk_idx) {
    EXPECT_THROW(dispatch_cached(handles_of(out), in), Error);
  }
}

}  // namespace
}  // namespace symmoe::ref
