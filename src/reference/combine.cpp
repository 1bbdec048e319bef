// Golden combine. See include/symmoe/reference/combine.hpp.
#include "symmoe/reference/combine.hpp"

#include <algorithm>

#include "reference/validate.hpp"
#include "symmoe/common.hpp"
#include "symmoe/formats.hpp"

namespace symmoe::ref {

void validate_combine_inputs(const std::vector<EpHandle>& handles, int hidden, const std::vector<CombineInput>& inputs,
                             const CombineOptions& options) {
  SYMMOE_CHECK(!handles.empty(), "ref", "combine: no handles");
  const int R = handles[0].num_ranks;
  SYMMOE_CHECK(int(handles.size()) == R && int(inputs.size()) == R, "ref", "combine: expected ", R,
               " handles and inputs, got ", handles.size(), " and ", inputs.size());
  SYMMOE_CHECK(hidden > 0, "ref", "combine: hidden must be > 0, got ", hidden);
  SYMMOE_CHECK(!options.reduce_local_experts || handles[0].do_expand, "ref",
               "combine: reduce_local_experts needs an expand-mode handle");
  const bool weights = inputs[0].topk_weights.has_value();
  for (int r = 0; r < R; ++r) {
    const EpHandle& h = handles[r];
    SYMMOE_CHECK(h.rank == r && h.num_ranks == R && h.do_expand == handles[0].do_expand, "ref", "combine: handle ", r,
                 " is for rank ", h.rank, " of ", h.num_ranks, " (mode ", h.do_expand ? "expand" : "non-expand", ")");
    const size_t rows = size_t(h.do_expand ? h.num_expanded_tokens : h.num_recv_tokens);
    const size_t K = size_t(h.num_topk), T = size_t(h.num_tokens);
    SYMMOE_CHECK(inputs[r].x.size() == rows * hidden, "ref", "combine: rank ", r, " x has ", inputs[r].x.size(),
                 " values, expected ", rows, " rows x hidden ", hidden);
    SYMMOE_CHECK(weights == inputs[r].topk_weights.has_value(), "ref", "combine: rank ", r,
                 " topk_weights given on some ranks only");
    SYMMOE_CHECK(!weights || inputs[r].topk_weights->size() == rows * (h.do_expand ? 1 : K), "ref", "combine: rank ", r,
                 " topk_weights has ", inputs[r].topk_weights->size(), " values, expected ",
                 rows * (h.do_expand ? 1 : K));
    for (const auto* bias : {&inputs[r].bias_0, &inputs[r].bias_1})
      SYMMOE_CHECK(!bias->has_value() || (*bias)->size() == T * hidden, "ref", "combine: rank ", r, " bias has ",
                   (*bias)->size(), " values, expected T*hidden = ", T * hidden);
  }
}

std::vector<CombineOutput> combine(const std::vector<EpHandle>& handles, int hidden,
                                   const std::vector<CombineInput>& inputs, const CombineOptions& options) {
  validate_combine_inputs(handles, hidden, inputs, options);
  const int R = handles[0].num_ranks, K = handles[0].num_topk, El = handles[0].num_local_experts();
  const int T_max = handles[0].num_max_tokens_per_rank;
  const bool expand = handles[0].do_expand, weights = inputs[0].topk_weights.has_value();
  std::vector<CombineOutput> outputs(R);
  std::vector<float> acc(hidden), partial(hidden);
  for (int s = 0; s < R; ++s) {
    const EpHandle& hs = handles[s];
    CombineOutput& out = outputs[s];
    out.combined_x.assign(size_t(hs.num_tokens) * hidden, 0);
    if (weights) out.combined_topk_weights.assign(size_t(hs.num_tokens) * K, 0.f);
    for (int t = 0; t < hs.num_tokens; ++t) {
      const int64_t* topk = &hs.topk_idx[size_t(t) * K];
      // Row on rank d of this token (non-expand order), found through the master lane's slot.
      auto recv_row_on = [&](int d) {
        for (int k = 0; k < K; ++k) {
          const int32_t slot_idx = hs.dst_buffer_slot_idx[size_t(t) * K + k];
          if (slot_idx >= 0 && topk[k] / El == d) return handles[d].recv_row_begin(s) + (slot_idx - s * T_max);
        }
        SYMMOE_FAIL("ref", "combine: rank ", s, " token ", t, " has no master lane for rank ", d);
      };
      auto expanded_row = [&](int d, int k) {
        const EpHandle& hd = handles[d];
        return hd.recv_src_metadata[size_t(recv_row_on(d)) * hd.metadata_stride() + 2 + k];
      };
      // DeepEP's order: the fp32 sum starts from the biases (bias_0 + bias_1), then adds the rows.
      std::fill(acc.begin(), acc.end(), 0.f);
      for (const auto* bias : {&inputs[s].bias_0, &inputs[s].bias_1}) {
        if (!bias->has_value()) continue;
        for (int c = 0; c < hidden; ++c) acc[c] += fmt::bf16_to_float((**bias)[size_t(t) * hidden + c]);
      }
      for (int k = 0; k < K; ++k) {
        if (topk[k] < 0) continue;
        const int d = int(topk[k] / El);
        const CombineInput& in = inputs[d];
        const bool master = hs.dst_buffer_slot_idx[size_t(t) * K + k] >= 0;
        if (weights) {
          const std::vector<float>& tw = *in.topk_weights;
          const float w = expand ? tw[expanded_row(d, k)] : tw[size_t(recv_row_on(d)) * K + k];
          out.combined_topk_weights[size_t(t) * K + k] = w;
        }
        if (!expand || !options.reduce_local_experts) {
          if (!expand && !master) continue;  // non-expand: one row per destination rank, added at its master lane
          const int row = expand ? expanded_row(d, k) : recv_row_on(d);
          const uint16_t* x = &in.x[size_t(row) * hidden];
          for (int c = 0; c < hidden; ++c) acc[c] += fmt::bf16_to_float(x[c]);
          continue;
        }
        // reduce_local_experts: rank d's partial (its lanes in ascending k, fp32, one bf16 rounding) at the master.
        if (!master) continue;
        std::fill(partial.begin(), partial.end(), 0.f);
        for (int j = 0; j < K; ++j) {
          if (topk[j] < 0 || topk[j] / El != d) continue;
          const uint16_t* x = &in.x[size_t(expanded_row(d, j)) * hidden];
          for (int c = 0; c < hidden; ++c) partial[c] += fmt::bf16_to_float(x[c]);
        }
        for (int c = 0; c < hidden; ++c) acc[c] += fmt::bf16_to_float(fmt::float_to_bf16(partial[c]));
      }
      for (int c = 0; c < hidden; ++c) out.combined_x[size_t(t) * hidden + c] = fmt::float_to_bf16(acc[c]);
    }
  }
  return outputs;
}

}  // namespace symmoe::ref
