// Golden dispatch: counting, slots, received/expanded rows, cached dispatch. See include/symmoe/reference/dispatch.hpp.
//
// NOTES: the fresh dispatch builds its outputs by walking the routing (for each destination: sources, tokens,
// lanes); the cached dispatch places rows from the handle alone (slots and expand columns). They are two
// independent derivations of the same rows, so the test "cached == fresh, bitwise" checks the handle is complete.
#include "symmoe/reference/dispatch.hpp"

#include <algorithm>
#include <cstring>

#include "reference/validate.hpp"
#include "symmoe/common.hpp"

namespace symmoe::ref {
namespace {

constexpr uint8_t kUnspecifiedPaddingByte = 0xFF;  // expand padding without zero_padding: NaN in bf16/e4m3

void validate_config(const DispatchConfig& c) {
  SYMMOE_CHECK(c.num_ranks >= 1, "ref", "dispatch: num_ranks must be >= 1, got ", c.num_ranks);
  SYMMOE_CHECK(c.num_experts > 0 && c.num_experts % c.num_ranks == 0, "ref", "dispatch: num_experts (", c.num_experts,
               ") must be a positive multiple of num_ranks (", c.num_ranks, ")");
  SYMMOE_CHECK(c.num_topk >= 1 && c.num_topk <= 32, "ref", "dispatch: num_topk must be in [1, 32], got ", c.num_topk);
  SYMMOE_CHECK(c.num_max_tokens_per_rank >= 1, "ref", "dispatch: num_max_tokens_per_rank must be >= 1, got ",
               c.num_max_tokens_per_rank);
  SYMMOE_CHECK(c.expert_alignment >= 1, "ref", "dispatch: expert_alignment must be >= 1, got ", c.expert_alignment);
}

}  // namespace

void validate_dispatch_inputs(const DispatchConfig& c, const std::vector<DispatchInput>& inputs) {
  validate_config(c);
  SYMMOE_CHECK(int(inputs.size()) == c.num_ranks, "ref", "dispatch: expected one input per rank (", c.num_ranks,
               "), got ", inputs.size());
  const int K = c.num_topk;
  for (int s = 0; s < c.num_ranks; ++s) {
    const DispatchInput& in = inputs[s];
    SYMMOE_CHECK(in.num_tokens >= 0 && in.num_tokens <= c.num_max_tokens_per_rank, "ref", "dispatch: rank ", s,
                 " has num_tokens ", in.num_tokens, ", expected 0..num_max_tokens_per_rank (",
                 c.num_max_tokens_per_rank, ")");
    SYMMOE_CHECK(in.x_row_bytes == inputs[0].x_row_bytes, "ref", "dispatch: rank ", s, " has x rows of ",
                 in.x_row_bytes, " bytes, rank 0 has ", inputs[0].x_row_bytes);
    SYMMOE_CHECK(in.sf_row_bytes == inputs[0].sf_row_bytes, "ref", "dispatch: rank ", s, " has scale rows of ",
                 in.sf_row_bytes, " bytes, rank 0 has ", inputs[0].sf_row_bytes);
    SYMMOE_CHECK(in.x_row_bytes > 0 && in.sf_row_bytes >= 0, "ref", "dispatch: rank ", s, " has x_row_bytes ",
                 in.x_row_bytes, " and sf_row_bytes ", in.sf_row_bytes, " (x rows must be non-empty)");
    const size_t T = size_t(in.num_tokens);
    SYMMOE_CHECK(in.x.size() == T * in.x_row_bytes, "ref", "dispatch: rank ", s, " x has ", in.x.size(),
                 " bytes, expected T*x_row_bytes = ", T * in.x_row_bytes);
    SYMMOE_CHECK(in.x_sf.size() == T * in.sf_row_bytes, "ref", "dispatch: rank ", s, " x_sf has ", in.x_sf.size(),
                 " bytes, expected T*sf_row_bytes = ", T * in.sf_row_bytes);
    SYMMOE_CHECK(in.topk_idx.size() == T * K, "ref", "dispatch: rank ", s, " topk_idx has ", in.topk_idx.size(),
                 " entries, expected T*K = ", T * K);
    SYMMOE_CHECK(in.topk_weights.size() == T * K, "ref", "dispatch: rank ", s, " topk_weights has ",
                 in.topk_weights.size(), " entries, expected T*K = ", T * K);
    for (int t = 0; t < in.num_tokens; ++t) {
      for (int k = 0; k < K; ++k) {
        const int64_t e = in.topk_idx[size_t(t) * K + k];
        SYMMOE_CHECK(e >= -1 && e < c.num_experts, "ref", "dispatch: rank ", s, " token ", t, " lane ", k,
                     ": expert id ", e, " outside [-1, ", c.num_experts, ")");
        for (int j = 0; j < k && e >= 0; ++j)
          SYMMOE_CHECK(in.topk_idx[size_t(t) * K + j] != e, "ref", "dispatch: rank ", s, " token ", t, " lane ", k,
                       ": expert ", e, " duplicates lane ", j);
      }
    }
  }
}

namespace {

int rank_of_expert(int64_t e, int num_local_experts) { return e < 0 ? -1 : int(e / num_local_experts); }

// Highest lane of token t whose expert lives on rank d, or -1.
int master_lane(const int64_t* topk_row, int K, int d, int num_local_experts) {
  int master = -1;
  for (int k = 0; k < K; ++k)
    if (rank_of_expert(topk_row[k], num_local_experts) == d) master = k;
  return master;
}

void copy_row(std::vector<uint8_t>& dst, size_t dst_row, const std::vector<uint8_t>& src, size_t src_row,
              size_t row_bytes) {
  if (row_bytes) std::memcpy(&dst[dst_row * row_bytes], &src[src_row * row_bytes], row_bytes);
}

}  // namespace

void allocate_outputs(DispatchOutput& out, const EpHandle& h, size_t x_row_bytes, size_t sf_row_bytes,
                      bool zero_padding) {
  const size_t K = size_t(h.num_topk);
  const size_t rows = size_t(h.do_expand ? h.num_expanded_tokens : h.num_recv_tokens);
  const uint8_t fill = (h.do_expand && !zero_padding) ? kUnspecifiedPaddingByte : 0;
  out.recv_x.assign(rows * x_row_bytes, fill);
  out.recv_sf.assign(rows * sf_row_bytes, fill);
  out.recv_topk_idx.assign(h.do_expand ? rows : rows * K, -1);
  out.recv_topk_weights.assign(h.do_expand ? rows : rows * K, 0.f);
}

int EpHandle::expert_start(int local_expert) const {
  int start = 0;
  for (int e = 0; e < local_expert; ++e) start += num_recv_tokens_per_expert_list[e];
  return start;
}

std::vector<DispatchOutput> dispatch(const DispatchConfig& c, const std::vector<DispatchInput>& inputs) {
  validate_dispatch_inputs(c, inputs);
  const int R = c.num_ranks, K = c.num_topk, El = c.num_experts / R, T_max = c.num_max_tokens_per_rank;
  std::vector<DispatchOutput> outputs(R);

  // Source side: counts and slots (ascending token order per destination).
  for (int s = 0; s < R; ++s) {
    const DispatchInput& in = inputs[s];
    EpHandle& h = outputs[s].handle;
    h.rank = s, h.num_ranks = R, h.do_expand = c.do_expand, h.num_experts = c.num_experts, h.num_topk = K;
    h.expert_alignment = c.expert_alignment, h.num_max_tokens_per_rank = T_max, h.num_tokens = in.num_tokens;
    h.topk_idx = in.topk_idx;
    h.num_tokens_per_rank.assign(R, 0);
    h.num_tokens_per_expert.assign(c.num_experts, 0);
    h.dst_buffer_slot_idx.assign(size_t(in.num_tokens) * K, -1);
    for (int t = 0; t < in.num_tokens; ++t) {
      const int64_t* row = &in.topk_idx[size_t(t) * K];
      for (int k = 0; k < K; ++k)
        if (row[k] >= 0) ++h.num_tokens_per_expert[row[k]];
      for (int d = 0; d < R; ++d) {
        const int master = master_lane(row, K, d, El);
        if (master < 0) continue;
        const int slot = h.num_tokens_per_rank[d]++;
        h.dst_buffer_slot_idx[size_t(t) * K + master] = s * T_max + slot;
      }
    }
  }

  // Destination side.
  for (int d = 0; d < R; ++d) {
    EpHandle& h = outputs[d].handle;
    // Received tokens in (source, token) order; they are exactly the tokens with a lane on d.
    struct Recv {
      int src_rank, token, master;
    };
    std::vector<Recv> recv;
    h.psum_num_recv_tokens_per_rank.assign(R, 0);
    h.num_unaligned_recv_tokens_per_expert.assign(El, 0);
    for (int s = 0; s < R; ++s) {
      const DispatchInput& in = inputs[s];
      for (int t = 0; t < in.num_tokens; ++t) {
        const int64_t* row = &in.topk_idx[size_t(t) * K];
        const int master = master_lane(row, K, d, El);
        if (master < 0) continue;
        recv.push_back({s, t, master});
        for (int k = 0; k < K; ++k)
          if (rank_of_expert(row[k], El) == d) ++h.num_unaligned_recv_tokens_per_expert[row[k] - d * El];
      }
      h.psum_num_recv_tokens_per_rank[s] = int(recv.size());
    }
    h.num_recv_tokens = int(recv.size());
    h.num_recv_tokens_per_expert_list.resize(El);
    h.psum_num_recv_tokens_per_expert.resize(El);
    std::vector<int> start(El);
    int total_aligned = 0;
    for (int e = 0; e < El; ++e) {
      const int aligned = align_up(h.num_unaligned_recv_tokens_per_expert[e], c.expert_alignment);
      h.num_recv_tokens_per_expert_list[e] = aligned;
      start[e] = total_aligned;
      total_aligned += aligned;
      h.psum_num_recv_tokens_per_expert[e] =
          c.do_expand ? start[e] + h.num_unaligned_recv_tokens_per_expert[e] : total_aligned;
    }
    h.num_expanded_tokens = total_aligned;

    DispatchOutput& out = outputs[d];
    const size_t xb = size_t(inputs[0].x_row_bytes), sb = size_t(inputs[0].sf_row_bytes);
    allocate_outputs(out, h, xb, sb, c.zero_padding);
    const int stride = h.metadata_stride();
    h.recv_src_metadata.assign(size_t(h.num_recv_tokens) * stride, -1);
    std::vector<int> cursor = start;  // next free expanded row per local expert
    for (int i = 0; i < h.num_recv_tokens; ++i) {
      const auto [s, t, master] = recv[i];
      const DispatchInput& in = inputs[s];
      int32_t* meta = &h.recv_src_metadata[size_t(i) * stride];
      meta[0] = s * T_max + t;
      meta[1] = s * K + master;
      if (!c.do_expand) {
        copy_row(out.recv_x, i, in.x, t, xb);
        copy_row(out.recv_sf, i, in.x_sf, t, sb);
        for (int k = 0; k < K; ++k) {
          const int64_t e = in.topk_idx[size_t(t) * K + k];
          out.recv_topk_idx[size_t(i) * K + k] = rank_of_expert(e, El) == d ? e - d * El : -1;
          out.recv_topk_weights[size_t(i) * K + k] = in.topk_weights[size_t(t) * K + k];
        }
        continue;
      }
      // Expand: rows are visited in ascending src_token_global_idx, so each expert's segment is ordered.
      for (int k = 0; k < K; ++k) {
        const int64_t e = in.topk_idx[size_t(t) * K + k];
        if (rank_of_expert(e, El) != d) continue;
        const int local = int(e - d * El);
        const int row = cursor[local]++;
        meta[2 + k] = row;
        copy_row(out.recv_x, row, in.x, t, xb);
        copy_row(out.recv_sf, row, in.x_sf, t, sb);
        out.recv_topk_idx[row] = local;
        out.recv_topk_weights[row] = in.topk_weights[size_t(t) * K + k];
      }
    }
  }
  return outputs;
}

std::vector<DispatchOutput> dispatch_cached(const std::vector<EpHandle>& handles,
                                            const std::vector<DispatchInput>& inputs, bool zero_padding) {
  SYMMOE_CHECK(!handles.empty(), "ref", "dispatch_cached: no handles");
  const EpHandle& h0 = handles[0];
  DispatchConfig c;
  c.num_ranks = h0.num_ranks, c.num_experts = h0.num_experts, c.num_topk = h0.num_topk;
  c.num_max_tokens_per_rank = h0.num_max_tokens_per_rank, c.expert_alignment = h0.expert_alignment;
  c.do_expand = h0.do_expand, c.zero_padding = zero_padding;
  SYMMOE_CHECK(int(handles.size()) == c.num_ranks, "ref", "dispatch_cached: expected ", c.num_ranks, " handles, got ",
               handles.size());
  validate_dispatch_inputs(c, inputs);
  for (int r = 0; r < c.num_ranks; ++r) {
    SYMMOE_CHECK(handles[r].rank == r && handles[r].num_tokens == inputs[r].num_tokens, "ref",
                 "dispatch_cached: handle ", r, " is for rank ", handles[r].rank, " with ", handles[r].num_tokens,
                 " tokens; input has ", inputs[r].num_tokens);
    SYMMOE_CHECK(handles[r].topk_idx == inputs[r].topk_idx, "ref", "dispatch_cached: rank ", r,
                 " topk_idx differs from the one its handle was made with");
  }
  const int R = c.num_ranks, K = c.num_topk, El = c.num_experts / R, T_max = c.num_max_tokens_per_rank;
  const size_t xb = size_t(inputs[0].x_row_bytes), sb = size_t(inputs[0].sf_row_bytes);
  std::vector<DispatchOutput> outputs(R);
  for (int d = 0; d < R; ++d) {
    outputs[d].handle = handles[d];
    allocate_outputs(outputs[d], handles[d], xb, sb, zero_padding);
  }
  // Walk each source's slots: the master lane of (t, d) names the row on d; expand columns come from d's metadata.
  for (int s = 0; s < R; ++s) {
    const EpHandle& hs = handles[s];
    const DispatchInput& in = inputs[s];
    for (int t = 0; t < in.num_tokens; ++t) {
      for (int master = 0; master < K; ++master) {
        const int32_t slot_idx = hs.dst_buffer_slot_idx[size_t(t) * K + master];
        if (slot_idx < 0) continue;
        const int d = rank_of_expert(hs.topk_idx[size_t(t) * K + master], El);
        const EpHandle& hd = handles[d];
        DispatchOutput& out = outputs[d];
        const int i = hd.recv_row_begin(s) + (slot_idx - s * T_max);
        if (!c.do_expand) {
          copy_row(out.recv_x, i, in.x, t, xb);
          copy_row(out.recv_sf, i, in.x_sf, t, sb);
          for (int k = 0; k < K; ++k) {
            const int64_t e = hs.topk_idx[size_t(t) * K + k];
            out.recv_topk_idx[size_t(i) * K + k] = rank_of_expert(e, El) == d ? e - d * El : -1;
            out.recv_topk_weights[size_t(i) * K + k] = in.topk_weights[size_t(t) * K + k];
          }
          continue;
        }
        const int32_t* meta = &hd.recv_src_metadata[size_t(i) * hd.metadata_stride()];
        for (int k = 0; k < K; ++k) {
          const int row = meta[2 + k];
          if (row < 0) continue;
          copy_row(out.recv_x, row, in.x, t, xb);
          copy_row(out.recv_sf, row, in.x_sf, t, sb);
          out.recv_topk_idx[row] = hs.topk_idx[size_t(t) * K + k] - d * El;
          out.recv_topk_weights[row] = in.topk_weights[size_t(t) * K + k];
        }
      }
    }
  }
  return outputs;
}

}  // namespace symmoe::ref
