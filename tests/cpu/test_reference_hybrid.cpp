// Golden hybrid (scale-out) dispatch/combine: bitwise equal to the flat model's received rows, handles and combined
// outputs for random routings, masked lanes and 1-8 nodes; the hybrid metadata's own invariants (node-master lanes,
// slots, forward metadata, traffic counts); the node-reduced combine (exact where no rounding happens, the specified
// order where it does); bad topologies; and a corrupted linked list that must be caught.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "reference/random.hpp"
#include "symmoe/reference/hybrid.hpp"
#include "test_reference_util.hpp"

namespace symmoe::ref {
namespace {

using testing::config_of;
using testing::handles_equal;
using testing::handles_of;
using testing::make_inputs;
using testing::RoutingCase;

constexpr int kHidden = 8;

// A case of the sweep plus a node count that divides its rank count.
struct HybridCase {
  RoutingCase routing;
  int num_nodes;
  std::string name() const { return routing.name() + " nodes=" + std::to_string(num_nodes); }
};

// Every node count 1..8 with 1-3 ranks per node, all generators, masking, both modes; plus the flat sweep's cases
// (R 1, 2, 3, 8) with every node count that divides R.
std::vector<HybridCase> hybrid_sweep() {
  std::vector<HybridCase> cases;
  uint64_t seed = 5000;
  for (int N = 1; N <= 8; ++N)
    for (int G : {1, 2, 3})
      for (RoutingKind kind : {RoutingKind::kUniform, RoutingKind::kZipf, RoutingKind::kHotExpert})
        for (double mask : {0.0, 0.3}) {
          ++seed;
          const int R = N * G, K = int(seed % 3 == 0 ? 1 : (seed % 3 == 1 ? 6 : 8));
          const int El = std::max<int>(int(seed % 3) + 1, (K + 1 + R - 1) / R);
          RoutingCase c{R, R * El, K, int(1 + seed % 23), int(seed % 2 ? 1 : 4), {}, (seed & 1) != 0, (seed & 2) != 0};
          c.options.kind = kind, c.options.mask_prob = mask, c.options.seed = seed;
          c.options.hot_expert = int(seed % uint64_t(c.num_experts)), c.options.hot_fraction = 0.7;
          cases.push_back({c, N});
        }
  for (const RoutingCase& c : testing::routing_sweep())
    for (int N = 1; N <= c.num_ranks; ++N)
      if (c.num_ranks % N == 0) cases.push_back({c, N});
  return cases;
}

std::vector<HybridHandle> hybrid_handles_of(const std::vector<HybridDispatchOutput>& out) {
  std::vector<HybridHandle> h;
  for (const auto& o : out) h.push_back(o.hybrid);
  return h;
}

std::vector<EpHandle> flat_handles_of(const std::vector<HybridDispatchOutput>& out) {
  std::vector<EpHandle> h;
  for (const auto& o : out) h.push_back(o.flat.handle);
  return h;
}

// Combine inputs of random bf16 values whose fp32 sums depend on the addition order (see below), NaN on
// expand padding rows (combine must never read them), weights as dispatched, biases on some cases.
std::vector<CombineInput> random_combine_inputs(const std::vector<DispatchOutput>& out, int hidden, uint64_t seed) {
  std::vector<CombineInput> cin(out.size());
  for (size_t d = 0; d < out.size(); ++d) {
    std::mt19937_64 rng(rnd::mix_seed(seed, d));
    const auto& o = out[d];
    const size_t rows = o.recv_x.size() / (2 * hidden);
    const bool expand = o.handle.do_expand;
    for (size_t r = 0; r < rows; ++r)
      for (int c = 0; c < hidden; ++c) {
        const bool padding = expand && o.recv_topk_idx[r] < 0;
        // Half the values are +-2^24: a small value added next to one is lost in fp32, so a sum like
        // (2^24 + small) - 2^24 differs from (2^24 - 2^24) + small and any change of the addition order shows.
        const double big = rnd::uniform_below(rng, 2) ? 0x1p24 : -0x1p24;
        const double small = rnd::standard_normal(rng) * std::ldexp(1.0, rnd::uniform_below(rng, 9) - 4);
        const double v = rnd::uniform_below(rng, 2) ? big : small;
        cin[d].x.push_back(padding ? uint16_t(0x7FC0) : fmt::float_to_bf16(float(v)));
      }
    cin[d].topk_weights = o.recv_topk_weights;
    if (seed % 3 != 0) {
      cin[d].bias_0.emplace();
      for (int i = 0; i < o.handle.num_tokens * hidden; ++i)
        cin[d].bias_0->push_back(fmt::float_to_bf16(float(rnd::standard_normal(rng))));
    }
  }
  return cin;
}

TEST(ReferenceHybrid, DispatchAndCombineEqualFlatBitwise) {
  std::set<int> node_counts;
  int num_cases = 0;
  for (const HybridCase& hc : hybrid_sweep()) {
    SCOPED_TRACE(hc.name());
    const RoutingCase& c = hc.routing;
    const auto inputs = make_inputs(c, kHidden);
    const auto flat = dispatch(config_of(c), inputs);
    const auto hybrid = hybrid_dispatch(config_of(c), hc.num_nodes, inputs);
    ASSERT_EQ(hybrid.size(), flat.size());
    for (int d = 0; d < c.num_ranks; ++d) {
      SCOPED_TRACE("rank " + std::to_string(d));
      const DispatchOutput& f = flat[d];
      const DispatchOutput& h = hybrid[d].flat;
      ASSERT_TRUE(test::bitwise_equal(f.recv_x, h.recv_x, "recv_x"));
      ASSERT_TRUE(test::bitwise_equal(f.recv_sf, h.recv_sf, "recv_sf"));
      ASSERT_TRUE(test::bitwise_equal(f.recv_topk_idx, h.recv_topk_idx, "recv_topk_idx"));
      ASSERT_TRUE(test::bitwise_equal(f.recv_topk_weights, h.recv_topk_weights, "recv_topk_weights"));
      ASSERT_TRUE(handles_equal(f.handle, h.handle));
    }
    for (int variant = 0; variant < (c.do_expand ? 2 : 1); ++variant) {
      CombineOptions options;
      options.reduce_local_experts = variant == 1;
      const auto cin = random_combine_inputs(flat, kHidden, c.options.seed + variant);
      const auto flat_out = combine(handles_of(flat), kHidden, cin, options);
      const auto hyb_out = hybrid_combine(flat_handles_of(hybrid), hybrid_handles_of(hybrid), kHidden, cin, options);
      for (int s = 0; s < c.num_ranks; ++s) {
        SCOPED_TRACE("source " + std::to_string(s) + (options.reduce_local_experts ? " reduce_local" : ""));
        ASSERT_TRUE(test::bitwise_equal(flat_out[s].combined_x, hyb_out[s].flat.combined_x, "combined_x"));
        ASSERT_TRUE(test::bitwise_equal(flat_out[s].combined_topk_weights, hyb_out[s].flat.combined_topk_weights,
                                        "combined_topk_weights"));
      }
    }
    node_counts.insert(hc.num_nodes);
    ++num_cases;
  }
  EXPECT_EQ(node_counts, (std::set<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(num_cases, 630);  // 144 hybrid cases + 486: the flat sweep (216 cases) x the node counts dividing R
}

// The hybrid metadata's own invariants, checked against the inputs directly (not against the model's code).
TEST(ReferenceHybrid, MetadataInvariantsAndTraffic) {
  for (const HybridCase& hc : hybrid_sweep()) {
    SCOPED_TRACE(hc.name());
    const RoutingCase& c = hc.routing;
    const HybridTopology topo{c.num_ranks, hc.num_nodes};
    const int R = c.num_ranks, K = c.num_topk, El = c.num_experts / R, T_max = c.num_max_tokens;
    const int N = hc.num_nodes, G = topo.ranks_per_node();
    const auto inputs = make_inputs(c, kHidden);
    const auto out = hybrid_dispatch(config_of(c), N, inputs);
    std::vector<int> forwarded(R, 0);     // records each forwarder must receive
    std::vector<int> from_fwd(R * G, 0);  // records rank d receives from forwarder l_f
    int64_t nvlink_expected = 0, nvlink_counted = 0;
    for (int s = 0; s < R; ++s) {
      const HybridHandle& hy = out[s].hybrid;
      int64_t remote_pairs = 0;
      std::vector<int> per_node(N, 0);
      for (int t = 0; t < inputs[s].num_tokens; ++t) {
        const int64_t* row = &inputs[s].topk_idx[size_t(t) * K];
        for (int k = 0; k < K; ++k) {
          const int n = row[k] < 0 ? -1 : topo.node_of(int(row[k] / El));
          bool highest_on_node = n >= 0;
          for (int j = k + 1; j < K && highest_on_node; ++j)
            highest_on_node = !(row[j] >= 0 && topo.node_of(int(row[j] / El)) == n);
          const int32_t v = hy.dst_scaleout_slot_idx[size_t(t) * K + k];
          if (!highest_on_node) {
            ASSERT_EQ(v, -1) << "token " << t << " lane " << k;
            continue;
          }
          ASSERT_EQ(v, topo.node_of(s) * T_max + per_node[n]) << "token " << t << " lane " << k;
          ++per_node[n];
          remote_pairs += n != topo.node_of(s);
          ++forwarded[topo.rank_of(n, topo.local_of(s))];
          std::set<int> ranks;
          for (int j = 0; j < K; ++j)
            if (row[j] >= 0 && topo.node_of(int(row[j] / El)) == n) ranks.insert(int(row[j] / El));
          for (int d : ranks) {
            nvlink_expected += topo.local_of(d) != topo.local_of(s);
            ++from_fwd[d * G + topo.local_of(s)];
          }
        }
      }
      ASSERT_EQ(std::vector<int32_t>(per_node.begin(), per_node.end()), hy.num_tokens_per_node);
      ASSERT_EQ(out[s].traffic.rdma_records, remote_pairs);
    }
    for (const auto& o : out) nvlink_counted += o.traffic.nvlink_records;
    ASSERT_EQ(nvlink_counted, nvlink_expected);
    for (int f = 0; f < R; ++f) {
      const HybridHandle& hy = out[f].hybrid;
      ASSERT_EQ(hy.num_forward_tokens, forwarded[f]);
      ASSERT_EQ(hy.psum_num_recv_tokens_per_scaleout_rank.back(), forwarded[f]);
      ASSERT_EQ(hy.token_metadata_at_forward.size(), size_t(forwarded[f]) * (2 + K));
      for (int p = 0; p < hy.num_forward_tokens; ++p) {
        const int32_t* meta = &hy.token_metadata_at_forward[size_t(p) * (2 + K)];
        const int s = meta[0] / T_max, t = meta[0] % T_max;
        ASSERT_EQ(topo.local_of(s), topo.local_of(f));
        ASSERT_EQ(meta[1] / K, topo.node_of(s));
        ASSERT_GE(out[s].hybrid.dst_scaleout_slot_idx[size_t(t) * K + meta[1] % K], 0);
        for (int k = 0; k < K; ++k) {
          if (meta[2 + k] < 0) continue;
          const int d = topo.rank_of(topo.node_of(f), int(meta[2 + k] / (int64_t(N) * T_max)));
          ASSERT_EQ(inputs[s].topk_idx[size_t(t) * K + k] / El, d) << "forward lane " << k << " names rank " << d;
        }
      }
    }
    for (int d = 0; d < R; ++d) {
      const HybridHandle& hy = out[d].hybrid;
      ASSERT_EQ(int(hy.channel_linked_list.size()), out[d].flat.handle.num_recv_tokens);
      const auto& psum = hy.psum_num_recv_tokens_per_scaleup_rank;
      for (int l = 0; l < G; ++l) ASSERT_EQ(psum[l] - (l ? psum[l - 1] : 0), from_fwd[d * G + l]) << "forwarder " << l;
      std::set<int32_t> positions(hy.channel_linked_list.begin(), hy.channel_linked_list.end());
      ASSERT_EQ(positions.size(), hy.channel_linked_list.size()) << "two rows arrived at one position";
    }
    for (const auto& o : out) {
      if (N == 1) {
        ASSERT_EQ(o.traffic.rdma_records, 0);
      }
      if (G == 1) {
        ASSERT_EQ(o.traffic.nvlink_records, 0);
      }
    }
  }
}

// Combine inputs whose sums are exact in fp32 and bf16 (the dispatched payload values, small integers; NaN on expand
// padding): any order gives the same bits, so the node-reduced combine must equal the flat one iff every row arrives
// exactly once.
std::vector<CombineInput> exact_combine_inputs(const std::vector<DispatchOutput>& out, int hidden) {
  std::vector<CombineInput> cin(out.size());
  for (size_t d = 0; d < out.size(); ++d) {
    const auto& o = out[d];
    const size_t rows = o.recv_x.size() / (2 * hidden);
    for (size_t r = 0; r < rows; ++r)
      for (int c = 0; c < hidden; ++c) {
        uint16_t b;
        std::memcpy(&b, &o.recv_x[(r * hidden + c) * 2], 2);
        cin[d].x.push_back(o.handle.do_expand && o.recv_topk_idx[r] < 0 ? uint16_t(0x7FC0) : b);
      }
    cin[d].topk_weights = o.recv_topk_weights;
  }
  return cin;
}

TEST(ReferenceHybrid, NodeReducedCombineDeliversEveryRowOnce) {
  int num_checked = 0;
  for (const HybridCase& hc : hybrid_sweep()) {
    SCOPED_TRACE(hc.name());
    const RoutingCase& c = hc.routing;
    const HybridTopology topo{c.num_ranks, hc.num_nodes};
    const auto inputs = make_inputs(c, kHidden);
    const auto flat = dispatch(config_of(c), inputs);
    const auto hybrid = hybrid_dispatch(config_of(c), hc.num_nodes, inputs);
    for (int variant = 0; variant < (c.do_expand ? 2 : 1); ++variant) {
      CombineOptions options;
      options.reduce_local_experts = variant == 1;
      // Exact values: node-reduced == flat bitwise.
      const auto cin = exact_combine_inputs(flat, kHidden);
      const auto flat_out = combine(handles_of(flat), kHidden, cin, options);
      const auto reduced = hybrid_combine(flat_handles_of(hybrid), hybrid_handles_of(hybrid), kHidden, cin, options,
                                          /*reduce_at_forwarder=*/true);
      int64_t rdma_rows = 0, expected_rdma_rows = 0;
      for (int s = 0; s < c.num_ranks; ++s) {
        ASSERT_TRUE(test::bitwise_equal(flat_out[s].combined_x, reduced[s].flat.combined_x, "combined_x"));
        ASSERT_TRUE(test::bitwise_equal(flat_out[s].combined_topk_weights, reduced[s].flat.combined_topk_weights,
                                        "combined_topk_weights"));
        rdma_rows += reduced[s].traffic.rdma_records;
        for (int t = 0; t < inputs[s].num_tokens; ++t) {
          std::set<int> remote_nodes;
          for (int k = 0; k < c.num_topk; ++k) {
            const int64_t e = inputs[s].topk_idx[size_t(t) * c.num_topk + k];
            const int n = e < 0 ? -1 : topo.node_of(int(e / (c.num_experts / c.num_ranks)));
            if (n >= 0 && n != topo.node_of(s)) remote_nodes.insert(n);
          }
          expected_rdma_rows += int64_t(remote_nodes.size());
        }
      }
      ASSERT_EQ(rdma_rows, expected_rdma_rows) << "one network row per (token, remote node)";
      // One rank per node returning one row per token (non-expand, or expand with reduce_local_experts): a node
      // partial is that row, so even random values match bitwise.
      if (topo.ranks_per_node() == 1 && (!c.do_expand || options.reduce_local_experts)) {
        const auto rin = random_combine_inputs(flat, kHidden, c.options.seed + 7);
        const auto f = combine(handles_of(flat), kHidden, rin, options);
        const auto h = hybrid_combine(flat_handles_of(hybrid), hybrid_handles_of(hybrid), kHidden, rin, options, true);
        for (int s = 0; s < c.num_ranks; ++s)
          ASSERT_TRUE(test::bitwise_equal(f[s].combined_x, h[s].flat.combined_x, "combined_x (G = 1)"));
      }
      ++num_checked;
    }
  }
  EXPECT_GT(num_checked, 300);
}

// Hand-worked order: 4 ranks on 2 nodes (1 expert each), one token with lanes (expert 2, expert 0, expert 3) and
// rows 2^24, 1, -2^24. Flat: ((0 + 2^24) + 1) - 2^24 = 0 in fp32 (2^24 + 1 rounds to 2^24). Node-reduced: node 1's
// partial 2^24 - 2^24 = 0 (master lane 2), node 0's partial 1 (master lane 1), added in master-lane order: 1.
TEST(ReferenceHybrid, NodeReducedCombineOrderHandWorked) {
  DispatchConfig config;
  config.num_ranks = 4, config.num_experts = 4, config.num_topk = 3, config.num_max_tokens_per_rank = 1;
  std::vector<DispatchInput> inputs(4);
  for (int s = 0; s < 4; ++s) {
    inputs[s].num_tokens = s == 0 ? 1 : 0, inputs[s].x_row_bytes = 2;
    inputs[s].x.assign(s == 0 ? 2 : 0, 0);
    if (s == 0) inputs[s].topk_idx = {2, 0, 3}, inputs[s].topk_weights = {0.5f, 0.25f, 0.25f};
  }
  const auto hybrid = hybrid_dispatch(config, 2, inputs);
  std::vector<CombineInput> cin(4);
  const float row_of_rank[4] = {1.f, 0.f, 0x1p24f, -0x1p24f};
  for (int d = 0; d < 4; ++d)
    cin[d].x.assign(size_t(hybrid[d].flat.handle.num_recv_tokens), fmt::float_to_bf16(row_of_rank[d]));
  const auto exact = hybrid_combine(flat_handles_of(hybrid), hybrid_handles_of(hybrid), 1, cin);
  const auto reduced = hybrid_combine(flat_handles_of(hybrid), hybrid_handles_of(hybrid), 1, cin, {}, true);
  EXPECT_EQ(fmt::bf16_to_float(exact[0].flat.combined_x[0]), 0.f);
  EXPECT_EQ(fmt::bf16_to_float(reduced[0].flat.combined_x[0]), 1.f);
  EXPECT_EQ(exact[0].traffic.rdma_records + exact[2].traffic.rdma_records, 2);  // node 1's forwarder (rank 2): 2 rows
  EXPECT_EQ(reduced[2].traffic.rdma_records, 1);                                // ... or one partial
}

// Cached dispatch from the hybrid handles alone reproduces a fresh dispatch bitwise (new x payload, same routing).
TEST(ReferenceHybrid, CachedDispatchEqualsFreshBitwise) {
  int num_checked = 0;
  for (const HybridCase& hc : hybrid_sweep()) {
    SCOPED_TRACE(hc.name());
    const RoutingCase& c = hc.routing;
    const auto inputs = make_inputs(c, kHidden);
    const auto first = hybrid_dispatch(config_of(c), hc.num_nodes, inputs);
    auto changed = inputs;
    for (auto& in : changed)
      for (auto& b : in.x) b ^= 0x5A;
    const auto fresh = hybrid_dispatch(config_of(c), hc.num_nodes, changed);
    const auto cached =
        hybrid_dispatch_cached(flat_handles_of(first), hybrid_handles_of(first), changed, c.zero_padding);
    for (int d = 0; d < c.num_ranks; ++d) {
      SCOPED_TRACE("rank " + std::to_string(d));
      const DispatchOutput& f = fresh[d].flat;
      const DispatchOutput& h = cached[d].flat;
      ASSERT_TRUE(test::bitwise_equal(f.recv_x, h.recv_x, "recv_x"));
      ASSERT_TRUE(test::bitwise_equal(f.recv_sf, h.recv_sf, "recv_sf"));
      ASSERT_TRUE(test::bitwise_equal(f.recv_topk_idx, h.recv_topk_idx, "recv_topk_idx"));
      ASSERT_TRUE(test::bitwise_equal(f.recv_topk_weights, h.recv_topk_weights, "recv_topk_weights"));
      ASSERT_TRUE(handles_equal(f.handle, h.handle));
      ASSERT_EQ(fresh[d].traffic.rdma_records, cached[d].traffic.rdma_records);
      ASSERT_EQ(fresh[d].traffic.nvlink_records, cached[d].traffic.nvlink_records);
    }
    ++num_checked;
  }
  EXPECT_EQ(num_checked, 630);

  // A routing that differs from the handle's, and a linked list pointing at another token's record, are refused.
  RoutingCase c{8, 32, 6, 16, 1, {}, false, true};
  c.options.seed = 78;
  const auto inputs = make_inputs(c, kHidden);
  const auto out = hybrid_dispatch(config_of(c), 2, inputs);
  auto other = inputs;
  other[3].topk_idx[0] = other[3].topk_idx[0] == 0 ? 1 : 0;
  EXPECT_NE(test::error_of([&] {
              hybrid_dispatch_cached(flat_handles_of(out), hybrid_handles_of(out), other);
            }).find("rank 3 topk_idx differs"),
            std::string::npos);
  auto hybrid = hybrid_handles_of(out);
  ASSERT_GE(hybrid[0].channel_linked_list.size(), 2u);
  std::swap(hybrid[0].channel_linked_list[0], hybrid[0].channel_linked_list[1]);
  EXPECT_NE(test::error_of([&] {
              hybrid_dispatch_cached(flat_handles_of(out), hybrid, inputs);
            }).find("its linked-list position holds"),
            std::string::npos);
}

TEST(ReferenceHybrid, CorruptedLinkedListIsCaught) {
  RoutingCase c{8, 32, 6, 16, 1, {}, false, true};
  c.options.seed = 77;
  const auto inputs = make_inputs(c, kHidden);
  auto out = hybrid_dispatch(config_of(c), 4, inputs);
  std::vector<DispatchOutput> flat_outs;
  for (const auto& o : out) flat_outs.push_back(o.flat);
  const auto combine_in = random_combine_inputs(flat_outs, kHidden, 3);
  const auto good = hybrid_combine(flat_handles_of(out), hybrid_handles_of(out), kHidden, combine_in);
  // Swap where two received rows of rank 0 go on their forwarder: the sums must change (or a row go missing).
  auto& list = out[0].hybrid.channel_linked_list;
  ASSERT_GE(list.size(), 2u);
  std::swap(list[0], list[1]);
  bool differs = false;
  try {
    const auto bad = hybrid_combine(flat_handles_of(out), hybrid_handles_of(out), kHidden, combine_in);
    for (int s = 0; s < c.num_ranks; ++s) differs |= bad[s].flat.combined_x != good[s].flat.combined_x;
  } catch (const Error&) {
    differs = true;
  }
  EXPECT_TRUE(differs);
}

TEST(ReferenceHybrid, BadTopologyNamesTheArgument) {
  RoutingCase c{6, 12, 2, 4, 1, {}, false, true};
  const auto inputs = make_inputs(c, kHidden);
  for (int nodes : {0, 4, -1, 7}) {
    const std::string msg = test::error_of([&] { hybrid_dispatch(config_of(c), nodes, inputs); });
    EXPECT_NE(msg.find("num_nodes (" + std::to_string(nodes) + ")"), std::string::npos) << msg;
    EXPECT_NE(msg.find("num_ranks (6)"), std::string::npos) << msg;
  }
  // Flat input errors come through with the flat model's message.
  auto bad = inputs;
  bad[1].topk_idx[0] = 99;
  const std::string msg = test::error_of([&] { hybrid_dispatch(config_of(c), 2, bad); });
  EXPECT_NE(msg.find("rank 1 token 0 lane 0: expert id 99"), std::string::npos) << msg;
}

}  // namespace
}  // namespace symmoe::ref
