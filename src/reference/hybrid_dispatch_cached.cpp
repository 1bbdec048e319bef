// Golden cached hybrid dispatch: both hops replayed from the handles alone (no counting, no sorting).
// See include/symmoe/reference/hybrid.hpp.
//
// NOTES: each hop reads only what its rank holds: the source its dst_scaleout_slot_idx, the forwarder its
// token_metadata_at_forward and scale-out prefix sums, the destination its channel_linked_list and (expand)
// recv_src_metadata. "cached == fresh, bitwise" therefore checks that the hybrid handle is complete.
#include "symmoe/reference/hybrid.hpp"

#include "reference/hybrid_records.hpp"
#include "reference/validate.hpp"
#include "symmoe/common.hpp"

namespace symmoe::ref {
namespace {

using hybrid_detail::make_record;
using hybrid_detail::put_row;
using hybrid_detail::Record;
using hybrid_detail::RecordBuffer;

const Record& record_at(const RecordBuffer& buffer, int64_t position, int rank, const char* what) {
  const auto it = buffer.find(position);
  SYMMOE_CHECK(it != buffer.end(), "ref", "hybrid_dispatch_cached: rank ", rank, " has no record at ", what,
               " position ", position);
  return it->second;
}

}  // namespace

std::vector<HybridDispatchOutput> hybrid_dispatch_cached(const std::vector<EpHandle>& handles,
                                                         const std::vector<HybridHandle>& hybrid,
                                                         const std::vector<DispatchInput>& inputs, bool zero_padding) {
  SYMMOE_CHECK(!handles.empty() && handles.size() == hybrid.size(), "ref", "hybrid_dispatch_cached: got ",
               handles.size(), " handles and ", hybrid.size(), " hybrid handles");
  const EpHandle& h0 = handles[0];
  DispatchConfig c;
  c.num_ranks = h0.num_ranks, c.num_experts = h0.num_experts, c.num_topk = h0.num_topk;
  c.num_max_tokens_per_rank = h0.num_max_tokens_per_rank, c.expert_alignment = h0.expert_alignment;
  c.do_expand = h0.do_expand, c.zero_padding = zero_padding;
  SYMMOE_CHECK(int(handles.size()) == c.num_ranks, "ref", "hybrid_dispatch_cached: expected ", c.num_ranks,
               " handles, got ", handles.size());
  const HybridTopology topo{c.num_ranks, hybrid[0].num_nodes};
  topo.validate();
  validate_dispatch_inputs(c, inputs);
  for (int r = 0; r < c.num_ranks; ++r) {
    SYMMOE_CHECK(handles[r].rank == r && handles[r].num_tokens == inputs[r].num_tokens, "ref",
                 "hybrid_dispatch_cached: handle ", r, " is for rank ", handles[r].rank, " with ",
                 handles[r].num_tokens, " tokens; input has ", inputs[r].num_tokens);
    SYMMOE_CHECK(handles[r].topk_idx == inputs[r].topk_idx, "ref", "hybrid_dispatch_cached: rank ", r,
                 " topk_idx differs from the one its handle was made with");
    SYMMOE_CHECK(hybrid[r].num_nodes == topo.num_nodes, "ref", "hybrid_dispatch_cached: rank ", r,
                 " hybrid handle is for ", hybrid[r].num_nodes, " nodes, rank 0's for ", topo.num_nodes);
  }
  const int R = c.num_ranks, K = c.num_topk, El = c.num_experts / R, T_max = c.num_max_tokens_per_rank;
  const int64_t region_rows = int64_t(topo.num_nodes) * T_max;
  std::vector<HybridDispatchOutput> outputs(R);
  std::vector<RecordBuffer> scaleout_recv(R), scaleup_recv(R);

  // Scale-out hop: the node-master lanes' slots name the forwarder position.
  for (int s = 0; s < R; ++s) {
    outputs[s].flat.handle = handles[s], outputs[s].hybrid = hybrid[s];
    const DispatchInput& in = inputs[s];
    for (int t = 0; t < in.num_tokens; ++t)
      for (int k = 0; k < K; ++k) {
        const int32_t position = hybrid[s].dst_scaleout_slot_idx[size_t(t) * K + k];
        if (position < 0) continue;
        const int node = topo.node_of(int(in.topk_idx[size_t(t) * K + k] / El));
        scaleout_recv[topo.rank_of(node, topo.local_of(s))][position] = make_record(in, s, t, K, T_max);
        outputs[s].traffic.rdma_records += node != topo.node_of(s);
      }
  }

  // Scale-up hop: forward-metadata row p is the record at (source node, p - rows of earlier source nodes).
  for (int f = 0; f < R; ++f) {
    const HybridHandle& hy = hybrid[f];
    for (int p = 0; p < hy.num_forward_tokens; ++p) {
      const int32_t* meta = &hy.token_metadata_at_forward[size_t(p) * (2 + K)];
      const int src_node = meta[1] / K;
      const int slot = p - (src_node == 0 ? 0 : hy.psum_num_recv_tokens_per_scaleout_rank[src_node - 1]);
      const Record& record = record_at(scaleout_recv[f], int64_t(src_node) * T_max + slot, f, "scale-out");
      SYMMOE_CHECK(record.src_token_global_idx == meta[0], "ref", "hybrid_dispatch_cached: forwarder ", f, " row ", p,
                   " names token ", meta[0], ", its scale-out slot holds ", record.src_token_global_idx);
      for (int k = 0; k < K; ++k) {
        if (meta[2 + k] < 0) continue;
        const int local = int(meta[2 + k] / region_rows);
        const int d = topo.rank_of(topo.node_of(f), local);
        scaleup_recv[d][topo.local_of(f) * region_rows + meta[2 + k] % region_rows] = record;
        outputs[f].traffic.nvlink_records += local != topo.local_of(f);
      }
    }
  }

  // Destinations: channel_linked_list names each flat row's arrival; expand rows come from recv_src_metadata.
  const size_t xb = size_t(inputs[0].x_row_bytes), sb = size_t(inputs[0].sf_row_bytes);
  for (int d = 0; d < R; ++d) {
    const EpHandle& h = handles[d];
    DispatchOutput& o = outputs[d].flat;
    allocate_outputs(o, h, xb, sb, zero_padding);
    const int stride = h.metadata_stride();
    for (int i = 0; i < h.num_recv_tokens; ++i) {
      const int32_t* meta = &h.recv_src_metadata[size_t(i) * stride];
      const Record& r = record_at(scaleup_recv[d], hybrid[d].channel_linked_list[i], d, "scale-up");
      SYMMOE_CHECK(r.src_token_global_idx == meta[0], "ref", "hybrid_dispatch_cached: rank ", d, " row ", i,
                   " expects token ", meta[0], ", its linked-list position holds ", r.src_token_global_idx);
      for (int k = 0; k < K; ++k) {
        const int64_t e = r.topk_idx[k];
        const bool on_d = e >= 0 && e / El == d;
        if (!c.do_expand) {
          o.recv_topk_idx[size_t(i) * K + k] = on_d ? e - int64_t(d) * El : -1;
          o.recv_topk_weights[size_t(i) * K + k] = r.topk_weights[k];
        } else if (meta[2 + k] >= 0) {
          put_row(o.recv_x, meta[2 + k], r.x);
          put_row(o.recv_sf, meta[2 + k], r.sf);
          o.recv_topk_idx[meta[2 + k]] = e - int64_t(d) * El;
          o.recv_topk_weights[meta[2 + k]] = r.topk_weights[k];
        }
      }
      if (!c.do_expand) {
        put_row(o.recv_x, i, r.x);
        put_row(o.recv_sf, i, r.sf);
      }
    }
  }
  return outputs;
}

}  // namespace symmoe::ref
