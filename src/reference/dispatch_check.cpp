// check_dispatch: the metadata invariants of dispatch, checked on any result (golden or GPU) against the inputs.
// Written from the spec in dispatch.hpp, not from dispatch.cpp, so it can catch a wrong model as well as a wrong
// kernel. Every message names rank, token, lane / row and expected vs got.
#include <cstring>
#include <sstream>

#include "symmoe/common.hpp"
#include "symmoe/reference/dispatch.hpp"

namespace symmoe::ref {
namespace {

// Collects the first few problems; later ones are only counted.
class Problems {
 public:
  template <typename... Args>
  void add(const Args&... args) {
    if (count_++ < kMaxReported) os_ << "  " << detail::concat(args...) << "\n";
  }
  std::string report() const {
    if (count_ == 0) return "";
    std::ostringstream out;
    out << count_ << " dispatch invariant(s) violated:\n" << os_.str();
    if (count_ > kMaxReported) out << "  ... and " << count_ - kMaxReported << " more\n";
    return out.str();
  }
  bool many() const { return count_ >= 1000; }

 private:
  static constexpr int kMaxReported = 12;
  int count_ = 0;
  std::ostringstream os_;
};

bool rows_equal(const std::vector<uint8_t>& a, size_t ra, const std::vector<uint8_t>& b, size_t rb, size_t bytes) {
  return bytes == 0 || std::memcmp(&a[ra * bytes], &b[rb * bytes], bytes) == 0;
}

bool row_is_zero(const std::vector<uint8_t>& a, size_t r, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (a[r * bytes + i]) return false;
  return true;
}

}  // namespace

std::string check_dispatch(const DispatchConfig& c, const std::vector<DispatchInput>& inputs,
                           const std::vector<DispatchOutput>& outputs) {
  Problems p;
  const int R = c.num_ranks, K = c.num_topk, El = c.num_experts / R, T_max = c.num_max_tokens_per_rank;
  if (int(inputs.size()) != R || int(outputs.size()) != R) {
    p.add("expected ", R, " inputs and outputs, got ", inputs.size(), " and ", outputs.size());
    return p.report();
  }
  const size_t xb = size_t(inputs[0].x_row_bytes), sb = size_t(inputs[0].sf_row_bytes);
  auto lane_rank = [&](int s, int t, int k) {
    const int64_t e = inputs[s].topk_idx[size_t(t) * K + k];
    return e < 0 ? -1 : int(e / El);
  };

  // Control fields and array sizes first: later checks index with them.
  for (int r = 0; r < R; ++r) {
    const EpHandle& h = outputs[r].handle;
    const int T = inputs[r].num_tokens;
    if (h.rank != r || h.num_ranks != R || h.num_experts != c.num_experts || h.num_topk != K ||
        h.num_max_tokens_per_rank != T_max || h.expert_alignment != c.expert_alignment || h.do_expand != c.do_expand ||
        h.num_tokens != T)
      p.add("rank ", r, ": handle control fields differ from the config");
    if (h.num_tokens_per_rank.size() != size_t(R) || h.num_tokens_per_expert.size() != size_t(c.num_experts) ||
        h.dst_buffer_slot_idx.size() != size_t(T) * K || h.topk_idx != inputs[r].topk_idx ||
        h.psum_num_recv_tokens_per_rank.size() != size_t(R) ||
        h.num_unaligned_recv_tokens_per_expert.size() != size_t(El) ||
        h.psum_num_recv_tokens_per_expert.size() != size_t(El) ||
        h.num_recv_tokens_per_expert_list.size() != size_t(El) ||
        h.recv_src_metadata.size() != size_t(h.num_recv_tokens) * (2 + K))
      p.add("rank ", r, ": handle array sizes (or its topk_idx copy) are wrong");
    const size_t rows = size_t(c.do_expand ? h.num_expanded_tokens : h.num_recv_tokens);
    const size_t per_row = c.do_expand ? 1 : size_t(K);
    if (outputs[r].recv_x.size() != rows * xb || outputs[r].recv_sf.size() != rows * sb ||
        outputs[r].recv_topk_idx.size() != rows * per_row || outputs[r].recv_topk_weights.size() != rows * per_row)
      p.add("rank ", r, ": output sizes do not match ", rows, " rows");
  }
  if (!p.report().empty()) return p.report();

  // Source side: counts, master lanes, slots in ascending token order.
  for (int s = 0; s < R; ++s) {
    const EpHandle& h = outputs[s].handle;
    std::vector<int> next_slot(R, 0);
    std::vector<int> pairs(c.num_experts, 0);
    for (int t = 0; t < inputs[s].num_tokens; ++t) {
      for (int k = 0; k < K; ++k)
        if (inputs[s].topk_idx[size_t(t) * K + k] >= 0) ++pairs[inputs[s].topk_idx[size_t(t) * K + k]];
      for (int k = 0; k < K; ++k) {
        const int d = lane_rank(s, t, k);
        bool is_master = d >= 0;
        for (int j = k + 1; j < K && is_master; ++j) is_master = lane_rank(s, t, j) != d;
        const int32_t got = h.dst_buffer_slot_idx[size_t(t) * K + k];
        const int32_t want = is_master ? s * T_max + next_slot[d] : -1;
        if (got != want)
          p.add("rank ", s, " token ", t, " lane ", k, ": dst_buffer_slot_idx expected ", want, " got ", got);
        if (is_master) ++next_slot[d];
      }
    }
    for (int d = 0; d < R; ++d)
      if (h.num_tokens_per_rank[d] != next_slot[d])
        p.add("rank ", s, ": num_tokens_per_rank[", d, "] expected ", next_slot[d], " got ", h.num_tokens_per_rank[d]);
    for (int e = 0; e < c.num_experts; ++e)
      if (h.num_tokens_per_expert[e] != pairs[e])
        p.add("rank ", s, ": num_tokens_per_expert[", e, "] expected ", pairs[e], " got ", h.num_tokens_per_expert[e]);
  }
  if (p.many()) return p.report();

  // Destination side.
  for (int d = 0; d < R; ++d) {
    const EpHandle& h = outputs[d].handle;
    const DispatchOutput& out = outputs[d];
    int running = 0;
    for (int s = 0; s < R; ++s) {
      running += outputs[s].handle.num_tokens_per_rank[d];
      if (h.psum_num_recv_tokens_per_rank[s] != running)
        p.add("rank ", d, ": psum_num_recv_tokens_per_rank[", s, "] expected ", running, " got ",
              h.psum_num_recv_tokens_per_rank[s]);
    }
    if (h.num_recv_tokens != running)
      p.add("rank ", d, ": num_recv_tokens expected ", running, " got ", h.num_recv_tokens);
    // Per local expert counts, alignment and the mode-dependent prefix sum.
    std::vector<int> start(El);
    int total = 0;
    for (int e = 0; e < El; ++e) {
      int unaligned = 0;
      for (int s = 0; s < R; ++s) unaligned += outputs[s].handle.num_tokens_per_expert[d * El + e];
      const int aligned = align_up(unaligned, c.expert_alignment);
      start[e] = total;
      total += aligned;
      const int psum = c.do_expand ? start[e] + unaligned : total;
      if (h.num_unaligned_recv_tokens_per_expert[e] != unaligned || h.num_recv_tokens_per_expert_list[e] != aligned ||
          h.psum_num_recv_tokens_per_expert[e] != psum)
        p.add("rank ", d, " local expert ", e, ": (unaligned, aligned, psum) expected (", unaligned, ", ", aligned,
              ", ", psum, ") got (", h.num_unaligned_recv_tokens_per_expert[e], ", ",
              h.num_recv_tokens_per_expert_list[e], ", ", h.psum_num_recv_tokens_per_expert[e], ")");
      if (start[e] % c.expert_alignment != 0) p.add("rank ", d, " local expert ", e, ": start not aligned");
    }
    if (h.num_expanded_tokens != total)
      p.add("rank ", d, ": num_expanded_tokens expected ", total, " got ", h.num_expanded_tokens);
    if (p.many() || h.num_recv_tokens != running || h.num_expanded_tokens != total) continue;

    // Received rows: identity, ordering, payload; expand rows: segment, order, payload.
    std::vector<int> expanded_owner(size_t(total), -1);  // recv row that claimed each expanded row
    int32_t prev_global = -1;
    for (int i = 0; i < h.num_recv_tokens; ++i) {
      const int32_t* meta = &h.recv_src_metadata[size_t(i) * (2 + K)];
      int s = 0;
      while (s < R - 1 && i >= h.psum_num_recv_tokens_per_rank[s]) ++s;
      const int t = meta[0] - s * T_max;
      if (meta[0] <= prev_global || t < 0 || t >= inputs[s].num_tokens) {
        p.add("rank ", d, " recv row ", i, ": src_token_global_idx ", meta[0], " out of order or not from rank ", s);
        prev_global = meta[0];
        continue;
      }
      prev_global = meta[0];
      int master = -1;
      for (int k = 0; k < K; ++k)
        if (lane_rank(s, t, k) == d) master = k;
      const int slot_idx = master < 0 ? -1 : outputs[s].handle.dst_buffer_slot_idx[size_t(t) * K + master];
      if (master < 0 || meta[1] != s * K + master || slot_idx - s * T_max != i - h.recv_row_begin(s)) {
        p.add("rank ", d, " recv row ", i, " (rank ", s, " token ", t, "): src_rank_topk_idx ", meta[1],
              " or slot does not match master lane ", master);
        continue;
      }
      if (!c.do_expand) {
        if (!rows_equal(out.recv_x, i, inputs[s].x, t, xb) || !rows_equal(out.recv_sf, i, inputs[s].x_sf, t, sb))
          p.add("rank ", d, " recv row ", i, ": payload is not rank ", s, " token ", t, "'s row");
        for (int k = 0; k < K; ++k) {
          const int64_t e = inputs[s].topk_idx[size_t(t) * K + k];
          const int64_t want = lane_rank(s, t, k) == d ? e - d * El : -1;
          if (out.recv_topk_idx[size_t(i) * K + k] != want || meta[2 + k] != -1 ||
              std::memcmp(&out.recv_topk_weights[size_t(i) * K + k], &inputs[s].topk_weights[size_t(t) * K + k], 4))
            p.add("rank ", d, " recv row ", i, " lane ", k, ": recv_topk_idx/weight/metadata col wrong (idx expected ",
                  want, " got ", out.recv_topk_idx[size_t(i) * K + k], ", col ", meta[2 + k], ")");
        }
        continue;
      }
      for (int k = 0; k < K; ++k) {
        const int row = meta[2 + k];
        if (lane_rank(s, t, k) != d) {
          if (row != -1) p.add("rank ", d, " recv row ", i, " lane ", k, ": expand column expected -1 got ", row);
          continue;
        }
        const int e = int(inputs[s].topk_idx[size_t(t) * K + k] - d * El);
        const int end = start[e] + h.num_unaligned_recv_tokens_per_expert[e];
        if (row < start[e] || row >= end || expanded_owner[row] != -1) {
          p.add("rank ", d, " recv row ", i, " lane ", k, ": expanded row ", row, " outside expert ", e, "'s rows [",
                start[e], ", ", end, ") or used twice");
          continue;
        }
        expanded_owner[row] = i;
        // Rows within a segment ascend with src_token_global_idx: the previous row of the segment has a smaller one.
        if (row > start[e] && expanded_owner[row - 1] == -1)
          p.add("rank ", d, " expert ", e, ": expanded row ", row, " filled before row ", row - 1,
                " (segment not in ascending source order)");
        if (!rows_equal(out.recv_x, row, inputs[s].x, t, xb) || !rows_equal(out.recv_sf, row, inputs[s].x_sf, t, sb))
          p.add("rank ", d, " expanded row ", row, ": payload is not rank ", s, " token ", t, "'s row");
        if (out.recv_topk_idx[row] != e ||
            std::memcmp(&out.recv_topk_weights[row], &inputs[s].topk_weights[size_t(t) * K + k], 4))
          p.add("rank ", d, " expanded row ", row, ": recv_topk_idx/weight expected (", e, ", lane ", k,
                "'s weight) got (", out.recv_topk_idx[row], ", ", out.recv_topk_weights[row], ")");
      }
    }
    if (!c.do_expand) continue;
    for (int e = 0; e < El; ++e) {
      const int end = start[e] + h.num_unaligned_recv_tokens_per_expert[e];
      for (int row = start[e]; row < start[e] + h.num_recv_tokens_per_expert_list[e]; ++row) {
        if (row < end) {
          if (expanded_owner[row] == -1)
            p.add("rank ", d, " expert ", e, ": valid expanded row ", row, " never filled");
          continue;
        }
        if (out.recv_topk_idx[row] != -1 || out.recv_topk_weights[row] != 0.f)
          p.add("rank ", d, " padding row ", row, ": recv_topk_idx/weight expected (-1, 0) got (",
                out.recv_topk_idx[row], ", ", out.recv_topk_weights[row], ")");
        if (c.zero_padding && (!row_is_zero(out.recv_x, row, xb) || !row_is_zero(out.recv_sf, row, sb)))
          p.add("rank ", d, " padding row ", row, ": not zeroed (zero_padding)");
      }
    }
  }
  return p.report();
}

}  // namespace symmoe::ref
