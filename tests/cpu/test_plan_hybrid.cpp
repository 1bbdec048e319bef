// Hybrid (scale-out) planner: buffer sizes and traffic follow their formulas, the time estimate is the stated
// model, the expected traffic matches what the golden hybrid model actually moves on sampled uniform routings,
// bad arguments raise errors naming the argument, and the sweep prints EP16-EP256 next to DeepEP's numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "common/compare.hpp"
#include "symmoe/plan_hybrid.hpp"
#include "symmoe/reference/hybrid.hpp"
#include "symmoe/reference/routing.hpp"

namespace symmoe {
namespace {

plan::HybridDims v3_dims(int ranks, int nodes, int tokens, int node_limit = 0) {
  return plan::HybridDims::from_shape(named_shape("v3", ranks, tokens), nodes, layout::TokenDtype::kFp8E4m3,
                                      node_limit);
}

using test::error_of;

TEST(PlanHybrid, BuffersAndTrafficFollowTheirFormulas) {
  for (int ranks : {16, 64, 256})
    for (int tokens : {128, 4096}) {
      const int nodes = ranks / 8, G = 8, K = 8, E = 256, H = 7168;
      const plan::HybridPlan p = plan::plan_hybrid(v3_dims(ranks, nodes, tokens));
      SCOPED_TRACE(p.to_string());
      // V3 FP8 record: x 7168 + 56 fp32 scales (224) + 8 idx + 8 weights + 8 expert positions + src idx, each field
      // 16-byte aligned: 7168 + 224 + 32 + 32 + 32 + 16 = 7504.
      ASSERT_EQ(p.record_bytes, 7504u);
      ASSERT_EQ(p.combine_row_bytes, uint32_t(2 * H));
      const uint64_t T = tokens, rec = 7504, row = 2 * H;
      EXPECT_EQ(p.scaleout_send_bytes, T * rec);
      EXPECT_EQ(p.scaleout_recv_bytes, uint64_t(nodes) * T * rec);
      EXPECT_EQ(p.scaleup_recv_bytes, uint64_t(ranks) * T * rec);
      EXPECT_EQ(p.forward_combine_recv_bytes, uint64_t(nodes) * T * std::min(G, K) * row);
      EXPECT_EQ(p.forward_reduce_bytes, uint64_t(nodes) * T * row);
      EXPECT_EQ(p.source_combine_recv_bytes, T * K * row);
      EXPECT_EQ(p.signal_bytes, uint64_t(2 * nodes * (G + E / nodes) * 4 + nodes * 8));
      EXPECT_EQ(p.total_bytes(), p.scaleout_send_bytes + p.scaleout_recv_bytes + p.scaleup_recv_bytes +
                                     p.forward_combine_recv_bytes + p.forward_reduce_bytes +
                                     p.source_combine_recv_bytes + p.signal_bytes);
      // Uniform routing: P(a set of m experts gets none of K draws without replacement from E).
      auto miss = [&](int m) {
        double q = 1;
        for (int i = 0; i < K; ++i) q *= double(E - m - i) / double(E - i);
        return q;
      };
      const double p_rank = 1 - miss(E / ranks), p_node = 1 - miss(E / nodes);
      EXPECT_NEAR(p.routing.p_rank, p_rank, 1e-12);
      EXPECT_NEAR(p.routing.p_node, p_node, 1e-12);
      EXPECT_NEAR(p.dispatch_rdma_bytes, double(T) * (nodes - 1) * p_node * rec, 1e-6);
      EXPECT_NEAR(p.dispatch_nvlink_bytes, double(T) * (ranks - nodes) * p_rank * rec, 1e-6);
      EXPECT_NEAR(p.combine_rdma_bytes, double(T) * (ranks - G) * p_rank * row, 1e-6);
      EXPECT_NEAR(p.combine_reduced_rdma_bytes, double(T) * (nodes - 1) * p_node * row, 1e-6);
      // The stated model: fixed latency (barrier + count exchange + last record's flight) + the slower link.
      const plan::HybridBandwidthModel& m = p.model;
      const double fixed = m.nvlink_barrier_us + 2 * m.rdma_latency_us;
      EXPECT_NEAR(
          p.dispatch_us,
          fixed + std::max(p.dispatch_rdma_bytes / (m.nic_gbps * 1e3), p.dispatch_nvlink_bytes / (m.nvlink_gbps * 1e3)),
          1e-9);
      EXPECT_NEAR(
          p.combine_us,
          fixed + std::max(p.combine_rdma_bytes / (m.nic_gbps * 1e3), p.combine_nvlink_bytes / (m.nvlink_gbps * 1e3)),
          1e-9);
      // Forwarding never sends more over the network than sending to every remote rank directly.
      EXPECT_LT(p.dispatch_rdma_bytes, p.dispatch_direct_rdma_bytes);
    }
}

TEST(PlanHybrid, OneNodeHasNoNetworkTraffic) {
  const plan::HybridPlan p = plan::plan_hybrid(v3_dims(8, 1, 4096));
  EXPECT_EQ(p.dispatch_rdma_bytes, 0.0);
  EXPECT_EQ(p.combine_rdma_bytes, 0.0);
  EXPECT_EQ(p.forward_reduce_bytes, 0u);
  EXPECT_NEAR(p.dispatch_us, p.model.nvlink_barrier_us + p.dispatch_nvlink_bytes / (p.model.nvlink_gbps * 1e3), 1e-9);
}

TEST(PlanHybrid, NodeLimitCutsNodesPerToken) {
  const plan::HybridPlan free = plan::plan_hybrid(v3_dims(64, 8, 4096));
  const plan::HybridPlan limited = plan::plan_hybrid(v3_dims(64, 8, 4096, 4));
  EXPECT_LE(limited.routing.nodes_per_token, 4.0);
  EXPECT_LT(limited.dispatch_rdma_bytes, free.dispatch_rdma_bytes);
  // Same expected (token, expert) pairs: K lanes land somewhere, so ranks per token only shrinks by collisions.
  EXPECT_LE(limited.routing.ranks_per_token, free.routing.ranks_per_token);
}

// The planner's expected counts against the records and rows the golden model moves on sampled uniform routings.
TEST(PlanHybrid, ExpectedTrafficMatchesTheGoldenModel) {
  const int R = 16, N = 4, E = 64, K = 6, T = 256, hidden = 8;
  ref::DispatchConfig config;
  config.num_ranks = R, config.num_experts = E, config.num_topk = K, config.num_max_tokens_per_rank = T;
  std::vector<ref::DispatchInput> inputs(R);
  ref::RoutingOptions options;
  options.seed = 2024;
  for (int s = 0; s < R; ++s) {
    const ref::Routing r = ref::make_routing(T, E, K, options, s);
    inputs[s].num_tokens = T, inputs[s].x_row_bytes = 2 * hidden;
    inputs[s].x.assign(size_t(T) * 2 * hidden, 0x11);
    inputs[s].topk_idx = r.topk_idx, inputs[s].topk_weights = r.topk_weights;
  }
  const auto out = ref::hybrid_dispatch(config, N, inputs);
  std::vector<ref::EpHandle> handles;
  std::vector<ref::HybridHandle> hybrid;
  std::vector<ref::CombineInput> cin(R);
  double rdma = 0, nvlink = 0;
  for (int r = 0; r < R; ++r) {
    handles.push_back(out[r].flat.handle), hybrid.push_back(out[r].hybrid);
    cin[r].x.assign(size_t(out[r].flat.handle.num_recv_tokens) * hidden, 0x3F80);
    rdma += double(out[r].traffic.rdma_records) / R, nvlink += double(out[r].traffic.nvlink_records) / R;
  }
  const auto back = ref::hybrid_combine(handles, hybrid, hidden, cin);
  const auto reduced = ref::hybrid_combine(handles, hybrid, hidden, cin, {}, /*reduce_at_forwarder=*/true);
  double back_rdma = 0, back_nvlink = 0, reduced_rdma = 0;
  for (int r = 0; r < R; ++r) {
    back_rdma += double(back[r].traffic.rdma_records) / R, back_nvlink += double(back[r].traffic.nvlink_records) / R;
    reduced_rdma += double(reduced[r].traffic.rdma_records) / R;
  }

  plan::HybridDims d;
  d.hidden = 128, d.num_experts = E, d.num_topk = K, d.num_ranks = R, d.num_nodes = N;
  d.num_max_tokens_per_rank = T, d.dtype = layout::TokenDtype::kBf16;
  const plan::HybridPlan p = plan::plan_hybrid(d);
  // ~4096 sampled tokens: the means are within ~1% of their expectation; 4% leaves room without hiding a wrong term.
  EXPECT_NEAR(rdma, p.dispatch_rdma_bytes / p.record_bytes, 0.04 * rdma);
  EXPECT_NEAR(nvlink, p.dispatch_nvlink_bytes / p.record_bytes, 0.04 * nvlink);
  EXPECT_NEAR(back_nvlink, p.combine_nvlink_bytes / p.combine_row_bytes, 0.04 * back_nvlink);
  EXPECT_NEAR(back_rdma, p.combine_rdma_bytes / p.combine_row_bytes, 0.04 * back_rdma);
  EXPECT_NEAR(reduced_rdma, p.combine_reduced_rdma_bytes / p.combine_row_bytes, 0.04 * reduced_rdma);
  EXPECT_LT(reduced_rdma, 0.8 * back_rdma);  // the point of reducing: R=16, N=4 sends ~1.5x fewer rows
}

TEST(PlanHybrid, BadArgumentsNameTheArgument) {
  const std::vector<std::pair<plan::HybridDims, std::string>> cases = {
      {v3_dims(64, 3, 128), "nodes (3) must be >= 1 and divide ranks (64)"},
      {v3_dims(64, 0, 128), "nodes (0)"},
      {v3_dims(64, 4, 128), "16 GPUs per node, expected <= 8"},
      {v3_dims(64, 8, 128, 9), "node_limit must be in [0, nodes = 8], got 9"},
      {v3_dims(48, 6, 128), "experts (256) must be a positive multiple of ranks (48)"},
      {v3_dims(4096, 512, 128), "ranks must be in [1, 2048], got 4096"},
      {v3_dims(16, 2, 0), "tokens per rank must be >= 1, got 0"},
  };
  for (const auto& [dims, needle] : cases) {
    const std::string msg = error_of([&] { plan::plan_hybrid(dims); });
    EXPECT_NE(msg.find(needle), std::string::npos) << "expected '" << needle << "', got '" << msg << "'";
  }
}

TEST(PlanHybrid, SweepListsEveryEpSizeNextToDeepEp) {
  const std::string table =
      plan::format_hybrid_sweep(named_shape("v3", 8, 128), {128, 4096}, layout::TokenDtype::kFp8E4m3, 0);
  for (const char* row : {"   16     2    128", "  256    32    128", "   64     8   4096", "  256    32   4096"})
    EXPECT_NE(table.find(row), std::string::npos) << row << "\n" << table;
  EXPECT_NE(table.find("V1 normal: 51 / 50 GB/s"), std::string::npos) << table;
  EXPECT_NE(table.find("V1 low-latency: 194 / 360 us"), std::string::npos) << table;
  EXPECT_NE(table.find("deepseek-ai/DeepEP"), std::string::npos);
}

}  // namespace
}  // namespace symmoe
