// Shared helpers of the golden-model tests: dispatch inputs whose payload rows encode (source rank, token), a
// sweep of routing cases, and bitwise handle comparison.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/compare.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/reference/dispatch.hpp"
#include "symmoe/reference/routing.hpp"

namespace symmoe::ref::testing {

// One case of the routing sweep.
struct RoutingCase {
  int num_ranks, num_experts, num_topk, num_max_tokens, alignment;
  RoutingOptions options;
  bool do_expand, zero_padding;
  std::string name() const {
    return detail::concat("R=", num_ranks, " E=", num_experts, " K=", num_topk, " T_max=", num_max_tokens,
                          " align=", alignment, " ", routing_kind_name(options.kind), " mask=", options.mask_prob,
                          " seed=", options.seed, do_expand ? " expand" : " non-expand",
                          zero_padding ? "" : " no-zero-padding");
  }
};

// The sweep of the brief: R in {1,2,3,8}, K in {1,6,8}, alignment 1/4/128, all generators, masking, both modes.
inline std::vector<RoutingCase> routing_sweep() {
  std::vector<RoutingCase> cases;
  uint64_t seed = 100;
  for (int R : {1, 2, 3, 8})
    for (int K : {1, 6, 8})
      for (int alignment : {1, 4, 128})
        for (RoutingKind kind : {RoutingKind::kUniform, RoutingKind::kZipf, RoutingKind::kHotExpert})
          for (double mask : {0.0, 0.3}) {
            ++seed;
            const int El = std::max<int>(int(seed % 3) + 1, (K + 1 + R - 1) / R);  // E > K so "hot" is valid
            RoutingCase c{R, R * El, K, int(1 + seed % 19), alignment, {}, (seed & 1) != 0, (seed & 2) != 0};
            c.options.kind = kind, c.options.mask_prob = mask, c.options.seed = seed;
            c.options.hot_expert = int(seed % uint64_t(c.num_experts)), c.options.hot_fraction = 0.7;
            cases.push_back(c);
          }
  return cases;
}

inline DispatchConfig config_of(const RoutingCase& c) {
  DispatchConfig config;
  config.num_ranks = c.num_ranks, config.num_experts = c.num_experts, config.num_topk = c.num_topk;
  config.num_max_tokens_per_rank = c.num_max_tokens, config.expert_alignment = c.alignment;
  config.do_expand = c.do_expand, config.zero_padding = c.zero_padding;
  return config;
}

// Payload value of (rank, token, column): a small integer, exact in bf16 and in small fp32 sums.
inline float payload_value(int rank, int token, int col) { return float(1 + (rank * 7 + token * 3 + col * 5) % 31); }

// Dispatch inputs of a case: bf16 x rows of `hidden` payload values, a 6-byte "scale" row that spells
// (rank, token), tokens per rank in [0, T_max] (rank 0 always T_max, rank 1 sometimes 0), token 0 of the last
// rank all-masked, and masked lanes carrying a nonzero weight (combine must return 0 for them).
inline std::vector<DispatchInput> make_inputs(const RoutingCase& c, int hidden) {
  std::vector<DispatchInput> inputs;
  for (int s = 0; s < c.num_ranks; ++s) {
    const int T = s == 0 ? c.num_max_tokens : int((c.options.seed * 31 + s * 17) % uint64_t(c.num_max_tokens + 1));
    const Routing r = make_routing(T, c.num_experts, c.num_topk, c.options, s);
    DispatchInput in;
    in.num_tokens = T, in.x_row_bytes = hidden * 2, in.sf_row_bytes = 6;
    in.topk_idx = r.topk_idx, in.topk_weights = r.topk_weights;
    if (s == c.num_ranks - 1 && T > 0 && c.options.mask_prob > 0)
      for (int k = 0; k < c.num_topk; ++k) in.topk_idx[k] = -1;
    for (size_t i = 0; i < in.topk_idx.size(); ++i)
      if (in.topk_idx[i] < 0) in.topk_weights[i] = 0.125f;
    in.x.resize(size_t(T) * in.x_row_bytes);
    in.x_sf.resize(size_t(T) * in.sf_row_bytes);
    for (int t = 0; t < T; ++t) {
      for (int col = 0; col < hidden; ++col) {
        const uint16_t b = fmt::float_to_bf16(payload_value(s, t, col));
        std::memcpy(&in.x[(size_t(t) * hidden + col) * 2], &b, 2);
      }
      const uint8_t tag[6] = {uint8_t('r'), uint8_t(s), uint8_t('t'), uint8_t(t), uint8_t(t >> 8), 0x5A};
      std::memcpy(&in.x_sf[size_t(t) * 6], tag, 6);
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

inline std::vector<EpHandle> handles_of(const std::vector<DispatchOutput>& outputs) {
  std::vector<EpHandle> h;
  for (const auto& o : outputs) h.push_back(o.handle);
  return h;
}

inline ::testing::AssertionResult handles_equal(const EpHandle& a, const EpHandle& b) {
  if (a.rank != b.rank || a.num_ranks != b.num_ranks || a.do_expand != b.do_expand || a.num_experts != b.num_experts ||
      a.num_topk != b.num_topk || a.expert_alignment != b.expert_alignment ||
      a.num_max_tokens_per_rank != b.num_max_tokens_per_rank || a.num_tokens != b.num_tokens ||
      a.num_recv_tokens != b.num_recv_tokens || a.num_expanded_tokens != b.num_expanded_tokens)
    return ::testing::AssertionFailure() << "handle control fields differ";
  for (auto r :
       {test::bitwise_equal(a.num_tokens_per_rank, b.num_tokens_per_rank, "num_tokens_per_rank"),
        test::bitwise_equal(a.num_tokens_per_expert, b.num_tokens_per_expert, "num_tokens_per_expert"),
        test::bitwise_equal(a.dst_buffer_slot_idx, b.dst_buffer_slot_idx, "dst_buffer_slot_idx"),
        test::bitwise_equal(a.topk_idx, b.topk_idx, "topk_idx"),
        test::bitwise_equal(a.psum_num_recv_tokens_per_rank, b.psum_num_recv_tokens_per_rank, "psum_rank"),
        test::bitwise_equal(a.num_unaligned_recv_tokens_per_expert, b.num_unaligned_recv_tokens_per_expert,
                            "num_unaligned"),
        test::bitwise_equal(a.psum_num_recv_tokens_per_expert, b.psum_num_recv_tokens_per_expert, "psum_expert"),
        test::bitwise_equal(a.num_recv_tokens_per_expert_list, b.num_recv_tokens_per_expert_list, "list"),
        test::bitwise_equal(a.recv_src_metadata, b.recv_src_metadata, "recv_src_metadata")})
    if (!r) return r;
  return ::testing::AssertionSuccess();
}

}  // namespace symmoe::ref::testing
