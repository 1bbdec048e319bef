// Golden hybrid dispatch: the scale-out hop (source -> forwarder on each destination node), the scale-up hop
// (forwarder -> destination ranks of its node), then each destination lays its records out in the flat order.
// See include/symmoe/reference/hybrid.hpp.
//
// NOTES: records are moved through sparse buffers (position -> record) whose positions are the ones the hybrid
// metadata names, and every destination-side output is built from the records it received (their carried expert
// ids, weights and src_token_global_idx), never from the inputs. The flat handle's source-side slots are written
// back from the destinations' view. So "hybrid == flat, bitwise" checks that the two hops deliver everything.
#include "symmoe/reference/hybrid.hpp"

#include <algorithm>

#include "reference/hybrid_records.hpp"
#include "reference/validate.hpp"
#include "symmoe/common.hpp"

namespace symmoe::ref {
namespace {

using hybrid_detail::make_record;
using hybrid_detail::master_lane;
using hybrid_detail::put_row;
using hybrid_detail::Record;
using hybrid_detail::RecordBuffer;

void inclusive_psum(std::vector<int32_t>& v) {
  for (size_t i = 1; i < v.size(); ++i) v[i] += v[i - 1];
}

// Destination d: the flat outputs and the flat handle's destination side, from the records d received (sorted into
// ascending src_token_global_idx, the flat order), plus channel_linked_list.
void assemble_destination(const DispatchConfig& c, const HybridTopology& topo, int d, const RecordBuffer& scaleup,
                          size_t x_row_bytes, size_t sf_row_bytes, HybridDispatchOutput& out) {
  const int R = c.num_ranks, K = c.num_topk, El = c.num_experts / R, T_max = c.num_max_tokens_per_rank;
  const int64_t region_rows = int64_t(topo.num_nodes) * T_max;  // one forwarder's region of the scale-up buffer
  auto on_d = [&](int64_t e) { return int(e / El) == d; };

  struct Arrival {
    const Record* record;
    int64_t position;
  };
  std::vector<Arrival> arrivals;
  HybridHandle& hy = out.hybrid;
  hy.psum_num_recv_tokens_per_scaleup_rank.assign(topo.ranks_per_node(), 0);
  for (const auto& [position, record] : scaleup) {
    arrivals.push_back({&record, position});
    ++hy.psum_num_recv_tokens_per_scaleup_rank[position / region_rows];
  }
  inclusive_psum(hy.psum_num_recv_tokens_per_scaleup_rank);
  std::sort(arrivals.begin(), arrivals.end(), [](const Arrival& a, const Arrival& b) {
    return a.record->src_token_global_idx < b.record->src_token_global_idx;
  });

  EpHandle& h = out.flat.handle;
  h.num_recv_tokens = int(arrivals.size());
  h.psum_num_recv_tokens_per_rank.assign(R, 0);
  h.num_unaligned_recv_tokens_per_expert.assign(El, 0);
  for (const Arrival& a : arrivals) {
    ++h.psum_num_recv_tokens_per_rank[a.record->src_token_global_idx / T_max];
    for (int64_t e : a.record->topk_idx)
      if (e >= 0 && on_d(e)) ++h.num_unaligned_recv_tokens_per_expert[e - int64_t(d) * El];
  }
  inclusive_psum(h.psum_num_recv_tokens_per_rank);
  h.num_recv_tokens_per_expert_list.resize(El);
  h.psum_num_recv_tokens_per_expert.resize(El);
  std::vector<int> cursor(El);  // expand: next free row per local expert, starting at the segment start
  int total_aligned = 0;
  for (int e = 0; e < El; ++e) {
    const int aligned = align_up(h.num_unaligned_recv_tokens_per_expert[e], c.expert_alignment);
    h.num_recv_tokens_per_expert_list[e] = aligned;
    cursor[e] = total_aligned;
    total_aligned += aligned;
    h.psum_num_recv_tokens_per_expert[e] =
        c.do_expand ? cursor[e] + h.num_unaligned_recv_tokens_per_expert[e] : total_aligned;
  }
  h.num_expanded_tokens = total_aligned;

  DispatchOutput& o = out.flat;
  allocate_outputs(o, h, x_row_bytes, sf_row_bytes, c.zero_padding);
  const int stride = h.metadata_stride();
  h.recv_src_metadata.assign(size_t(h.num_recv_tokens) * stride, -1);
  hy.channel_linked_list.resize(arrivals.size());
  for (int i = 0; i < h.num_recv_tokens; ++i) {
    const Record& r = *arrivals[i].record;
    const int master = master_lane(r.topk_idx.data(), K, d, [&](int64_t e) { return int(e / El); });
    int32_t* meta = &h.recv_src_metadata[size_t(i) * stride];
    meta[0] = r.src_token_global_idx;
    meta[1] = (r.src_token_global_idx / T_max) * K + master;
    hy.channel_linked_list[i] = int32_t(arrivals[i].position);
    if (!c.do_expand) {
      put_row(o.recv_x, i, r.x);
      put_row(o.recv_sf, i, r.sf);
      for (int k = 0; k < K; ++k) {
        const int64_t e = r.topk_idx[k];
        o.recv_topk_idx[size_t(i) * K + k] = e >= 0 && on_d(e) ? e - int64_t(d) * El : -1;
        o.recv_topk_weights[size_t(i) * K + k] = r.topk_weights[k];
      }
      continue;
    }
    for (int k = 0; k < K; ++k) {
      const int64_t e = r.topk_idx[k];
      if (e < 0 || !on_d(e)) continue;
      const int local = int(e - int64_t(d) * El);
      const int row = cursor[local]++;
      meta[2 + k] = row;
      put_row(o.recv_x, row, r.x);
      put_row(o.recv_sf, row, r.sf);
      o.recv_topk_idx[row] = local;
      o.recv_topk_weights[row] = r.topk_weights[k];
    }
  }
}

}  // namespace

void HybridTopology::validate() const {
  SYMMOE_CHECK(num_nodes >= 1 && num_ranks >= 1 && num_ranks % num_nodes == 0, "ref", "hybrid: num_nodes (", num_nodes,
               ") must be >= 1 and divide num_ranks (", num_ranks, ")");
}

std::vector<HybridDispatchOutput> hybrid_dispatch(const DispatchConfig& c, int num_nodes,
                                                  const std::vector<DispatchInput>& inputs) {
  const HybridTopology topo{c.num_ranks, num_nodes};
  topo.validate();
  validate_dispatch_inputs(c, inputs);
  const int R = c.num_ranks, N = num_nodes, G = topo.ranks_per_node(), K = c.num_topk;
  const int El = c.num_experts / R, T_max = c.num_max_tokens_per_rank;
  const int64_t region_rows = int64_t(N) * T_max;
  auto rank_of_expert = [&](int64_t e) { return int(e / El); };
  auto node_of_expert = [&](int64_t e) { return topo.node_of(int(e / El)); };

  std::vector<HybridDispatchOutput> outputs(R);
  std::vector<RecordBuffer> scaleout_recv(R), scaleup_recv(R);

  // Scale-out hop: each source sends a token once per destination node, to its forwarder there.
  for (int s = 0; s < R; ++s) {
    const DispatchInput& in = inputs[s];
    EpHandle& h = outputs[s].flat.handle;
    h.rank = s, h.num_ranks = R, h.do_expand = c.do_expand, h.num_experts = c.num_experts, h.num_topk = K;
    h.expert_alignment = c.expert_alignment, h.num_max_tokens_per_rank = T_max, h.num_tokens = in.num_tokens;
    h.topk_idx = in.topk_idx;
    h.num_tokens_per_rank.assign(R, 0);
    h.num_tokens_per_expert.assign(c.num_experts, 0);
    h.dst_buffer_slot_idx.assign(size_t(in.num_tokens) * K, -1);  // written back by the destinations below
    HybridHandle& hy = outputs[s].hybrid;
    hy.num_nodes = N, hy.ranks_per_node = G;
    hy.num_tokens_per_node.assign(N, 0);
    hy.dst_scaleout_slot_idx.assign(size_t(in.num_tokens) * K, -1);
    const int src_node = topo.node_of(s);
    for (int t = 0; t < in.num_tokens; ++t) {
      const int64_t* row = &in.topk_idx[size_t(t) * K];
      for (int k = 0; k < K; ++k)
        if (row[k] >= 0) ++h.num_tokens_per_expert[row[k]];
      for (int n = 0; n < N; ++n) {
        const int master = master_lane(row, K, n, node_of_expert);
        if (master < 0) continue;
        const int slot = hy.num_tokens_per_node[n]++;
        hy.dst_scaleout_slot_idx[size_t(t) * K + master] = src_node * T_max + slot;
        const int forwarder = topo.rank_of(n, topo.local_of(s));
        scaleout_recv[forwarder][int64_t(src_node) * T_max + slot] = make_record(in, s, t, K, T_max);
        outputs[s].traffic.rdma_records += n != src_node;
      }
    }
  }

  // Scale-up hop: each forwarder walks its scale-out buffer in (source node, slot) order and sends each record once
  // per destination rank of its node.
  for (int f = 0; f < R; ++f) {
    HybridHandle& hy = outputs[f].hybrid;
    const int node = topo.node_of(f), l_f = topo.local_of(f);
    const int stride = 2 + K;
    hy.psum_num_recv_tokens_per_scaleout_rank.assign(N, 0);
    std::vector<int> scaleup_slot(G, 0);  // next slot in each destination's region of this forwarder
    for (const auto& [position, record] : scaleout_recv[f]) {
      const int src_node = int(position / T_max);
      ++hy.psum_num_recv_tokens_per_scaleout_rank[src_node];
      std::vector<int32_t> meta(stride, -1);
      meta[0] = record.src_token_global_idx;
      meta[1] = src_node * K + master_lane(record.topk_idx.data(), K, node, node_of_expert);
      for (int l = 0; l < G; ++l) {
        const int d = topo.rank_of(node, l);
        const int master = master_lane(record.topk_idx.data(), K, d, rank_of_expert);
        if (master < 0) continue;
        const int slot = scaleup_slot[l]++;
        meta[2 + master] = int32_t(l * region_rows + slot);
        scaleup_recv[d][l_f * region_rows + slot] = record;
        outputs[f].traffic.nvlink_records += l != l_f;
      }
      hy.token_metadata_at_forward.insert(hy.token_metadata_at_forward.end(), meta.begin(), meta.end());
      ++hy.num_forward_tokens;
    }
    inclusive_psum(hy.psum_num_recv_tokens_per_scaleout_rank);
  }

  // Destinations: flat layout from the records; then the sources' flat slots, written back from each destination's
  // rows (slot of (s, t) on d = its row among s's rows on d).
  const size_t xb = size_t(inputs[0].x_row_bytes), sb = size_t(inputs[0].sf_row_bytes);
  for (int d = 0; d < R; ++d) assemble_destination(c, topo, d, scaleup_recv[d], xb, sb, outputs[d]);
  for (int d = 0; d < R; ++d) {
    const EpHandle& hd = outputs[d].flat.handle;
    for (int i = 0; i < hd.num_recv_tokens; ++i) {
      const int32_t* meta = &hd.recv_src_metadata[size_t(i) * hd.metadata_stride()];
      const int s = meta[0] / T_max, t = meta[0] % T_max, master = meta[1] % K;
      EpHandle& hs = outputs[s].flat.handle;
      hs.dst_buffer_slot_idx[size_t(t) * K + master] = s * T_max + (i - hd.recv_row_begin(s));
      ++hs.num_tokens_per_rank[d];
    }
  }
  return outputs;
}

}  // namespace symmoe::ref
