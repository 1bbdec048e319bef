// Golden hybrid combine: destination -> forwarder over NVLink, forwarder -> source over the network (each rank's rows
// unchanged, or one node partial with reduce_at_forwarder), the source adds in ascending lane order.
// See include/symmoe/reference/hybrid.hpp.
//
// NOTES: rows are located only through the hybrid metadata: the destination writes to the forwarder position its
// channel_linked_list names, the forwarder gathers a token's rows at the columns of token_metadata_at_forward and
// returns them to the source's (node, scale-out slot) position, and the source finds them through
// dst_scaleout_slot_idx. The flat handle's dst_buffer_slot_idx and psum_num_recv_tokens_per_rank are not read.
#include "symmoe/reference/hybrid.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "reference/validate.hpp"
#include "symmoe/common.hpp"
#include "symmoe/formats.hpp"

namespace symmoe::ref {
namespace {

// What one destination rank returns for one token: its row(s) tagged with the lane they are added at (non-expand:
// one row at its master lane; expand: one row per lane; expand + reduce_local_experts: one partial at the master
// lane), and the top-k weights it holds for the token (all K columns non-expand, its own lanes expand).
struct Returned {
  int master_lane = -1;
  std::vector<std::pair<int, std::vector<uint16_t>>> rows;  // (lane, bf16 row)
  std::vector<float> weights;                               // [K], NaN where this rank holds none
};

// What a forwarder returns to a source for one token: the rows of every destination rank of its node, unreduced.
using NodeReturn = std::vector<Returned>;

// The forwarder's node partial: its ranks' rows of one token summed in ascending lane order in fp32 and rounded
// once to bf16, as the one row of the node (at the node-master lane). Each rank's weights stay with its block, so the
// source still takes lane j's weight from the rank owning lane j.
NodeReturn reduce_node(NodeReturn node_return, int node_master_lane, int hidden) {
  std::vector<std::pair<int, const std::vector<uint16_t>*>> rows;
  for (const Returned& r : node_return)
    for (const auto& [lane, row] : r.rows) rows.emplace_back(lane, &row);
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<float> partial(hidden, 0.f);
  for (const auto& [lane, row] : rows)
    for (int c = 0; c < hidden; ++c) partial[c] += fmt::bf16_to_float((*row)[c]);
  std::vector<uint16_t> rounded(hidden);
  for (int c = 0; c < hidden; ++c) rounded[c] = fmt::float_to_bf16(partial[c]);
  for (Returned& r : node_return) r.rows.clear();
  node_return[0].rows.emplace_back(node_master_lane, std::move(rounded));
  return node_return;
}

void validate(const std::vector<EpHandle>& handles, const std::vector<HybridHandle>& hybrid, int hidden,
              const std::vector<CombineInput>& inputs, const CombineOptions& options) {
  validate_combine_inputs(handles, hidden, inputs, options);
  const int R = handles[0].num_ranks;
  SYMMOE_CHECK(int(hybrid.size()) == R, "ref", "hybrid_combine: expected ", R, " hybrid handles, got ", hybrid.size());
  const HybridTopology topo{R, hybrid[0].num_nodes};
  topo.validate();
  for (int r = 0; r < R; ++r) {
    const HybridHandle& hy = hybrid[r];
    SYMMOE_CHECK(hy.num_nodes == topo.num_nodes && hy.ranks_per_node == topo.ranks_per_node(), "ref",
                 "hybrid_combine: rank ", r, " hybrid handle is for ", hy.num_nodes, " nodes of ", hy.ranks_per_node,
                 " ranks, rank 0's for ", topo.num_nodes, " of ", topo.ranks_per_node());
    SYMMOE_CHECK(int(hy.channel_linked_list.size()) == handles[r].num_recv_tokens, "ref", "hybrid_combine: rank ", r,
                 " channel_linked_list has ", hy.channel_linked_list.size(), " entries, expected num_recv_tokens ",
                 handles[r].num_recv_tokens);
  }
}

}  // namespace

std::vector<HybridCombineOutput> hybrid_combine(const std::vector<EpHandle>& handles,
                                                const std::vector<HybridHandle>& hybrid, int hidden,
                                                const std::vector<CombineInput>& inputs, const CombineOptions& options,
                                                bool reduce_at_forwarder) {
  validate(handles, hybrid, hidden, inputs, options);
  const int R = handles[0].num_ranks, K = handles[0].num_topk, El = handles[0].num_local_experts();
  const int T_max = handles[0].num_max_tokens_per_rank;
  const HybridTopology topo{R, hybrid[0].num_nodes};
  const int N = topo.num_nodes;
  const int64_t region_rows = int64_t(N) * T_max;
  const bool expand = handles[0].do_expand, weights = inputs[0].topk_weights.has_value();
  auto row_of = [&](const CombineInput& in, int row) {
    return std::vector<uint16_t>(in.x.begin() + size_t(row) * hidden, in.x.begin() + size_t(row + 1) * hidden);
  };
  std::vector<HybridCombineOutput> outputs(R);

  // Destination -> forwarder (NVLink): forwarder_recv[f] maps (destination local l) * region_rows + slot.
  std::vector<std::map<int64_t, Returned>> forwarder_recv(R);
  for (int d = 0; d < R; ++d) {
    const EpHandle& h = handles[d];
    const CombineInput& in = inputs[d];
    for (int i = 0; i < h.num_recv_tokens; ++i) {
      const int32_t* meta = &h.recv_src_metadata[size_t(i) * h.metadata_stride()];
      Returned ret;
      ret.master_lane = meta[1] % K;
      ret.weights.assign(K, NAN);
      if (!expand) {
        ret.rows.emplace_back(ret.master_lane, row_of(in, i));
        if (weights) std::copy_n(in.topk_weights->begin() + size_t(i) * K, K, ret.weights.begin());
      } else {
        std::vector<float> partial(hidden, 0.f);
        for (int k = 0; k < K; ++k) {
          const int row = meta[2 + k];
          if (row < 0) continue;
          if (weights) ret.weights[k] = (*in.topk_weights)[row];
          if (!options.reduce_local_experts) {
            ret.rows.emplace_back(k, row_of(in, row));
            continue;
          }
          for (int c = 0; c < hidden; ++c) partial[c] += fmt::bf16_to_float(in.x[size_t(row) * hidden + c]);
        }
        if (options.reduce_local_experts) {
          std::vector<uint16_t> rounded(hidden);
          for (int c = 0; c < hidden; ++c) rounded[c] = fmt::float_to_bf16(partial[c]);
          ret.rows.emplace_back(ret.master_lane, std::move(rounded));
        }
      }
      const int64_t arrival = hybrid[d].channel_linked_list[i];
      const int l_f = int(arrival / region_rows);
      const int f = topo.rank_of(topo.node_of(d), l_f);
      outputs[d].traffic.nvlink_records += f != d ? int64_t(ret.rows.size()) : 0;
      forwarder_recv[f][topo.local_of(d) * region_rows + arrival % region_rows] = std::move(ret);
    }
  }

  // Forwarder -> source (network): source_recv[s] maps (forwarder node) * T_max + scale-out slot.
  std::vector<std::map<int64_t, NodeReturn>> source_recv(R);
  for (int f = 0; f < R; ++f) {
    const HybridHandle& hy = hybrid[f];
    const int stride = 2 + K, node = topo.node_of(f);
    for (int p = 0; p < hy.num_forward_tokens; ++p) {
      const int32_t* meta = &hy.token_metadata_at_forward[size_t(p) * stride];
      const int s = meta[0] / T_max, src_node = meta[1] / K;
      const int slot = p - (src_node == 0 ? 0 : hy.psum_num_recv_tokens_per_scaleout_rank[src_node - 1]);
      NodeReturn node_return;
      for (int k = 0; k < K; ++k) {
        if (meta[2 + k] < 0) continue;
        const auto it = forwarder_recv[f].find(meta[2 + k]);
        SYMMOE_CHECK(it != forwarder_recv[f].end(), "ref", "hybrid_combine: forwarder ", f, " has no row from rank ",
                     topo.rank_of(node, int(meta[2 + k] / region_rows)), " for source ", s, " token ", meta[0] % T_max);
        node_return.push_back(std::move(it->second));
      }
      if (reduce_at_forwarder && !node_return.empty())
        node_return = reduce_node(std::move(node_return), meta[1] % K, hidden);
      if (node != topo.node_of(s))
        for (const Returned& r : node_return) outputs[f].traffic.rdma_records += int64_t(r.rows.size());
      source_recv[s][int64_t(node) * T_max + slot] = std::move(node_return);
    }
  }

  // Sources: gather every node's rows of a token; start from the biases, then add the rows in ascending lane order.
  std::vector<float> acc(hidden);
  for (int s = 0; s < R; ++s) {
    const EpHandle& hs = handles[s];
    const HybridHandle& hy = hybrid[s];
    CombineOutput& out = outputs[s].flat;
    out.combined_x.assign(size_t(hs.num_tokens) * hidden, 0);
    if (weights) out.combined_topk_weights.assign(size_t(hs.num_tokens) * K, 0.f);
    for (int t = 0; t < hs.num_tokens; ++t) {
      const int64_t* topk = &hs.topk_idx[size_t(t) * K];
      std::vector<const Returned*> returned;
      for (int k = 0; k < K; ++k) {
        const int32_t slot_idx = hy.dst_scaleout_slot_idx[size_t(t) * K + k];
        if (slot_idx < 0) continue;
        const int node = topo.node_of(int(topk[k] / El));
        const auto it = source_recv[s].find(int64_t(node) * T_max + slot_idx % T_max);
        SYMMOE_CHECK(it != source_recv[s].end(), "ref", "hybrid_combine: source ", s, " token ", t,
                     " got nothing back from node ", node);
        for (const Returned& r : it->second) returned.push_back(&r);
      }
      std::vector<std::pair<int, const std::vector<uint16_t>*>> rows;
      for (const Returned* r : returned)
        for (const auto& [lane, row] : r->rows) rows.emplace_back(lane, &row);
      std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::fill(acc.begin(), acc.end(), 0.f);  // the flat combine's order: biases first, then the rows by lane
      for (const auto* bias : {&inputs[s].bias_0, &inputs[s].bias_1}) {
        if (!bias->has_value()) continue;
        for (int c = 0; c < hidden; ++c) acc[c] += fmt::bf16_to_float((**bias)[size_t(t) * hidden + c]);
      }
      for (const auto& [lane, row] : rows)
        for (int c = 0; c < hidden; ++c) acc[c] += fmt::bf16_to_float((*row)[c]);
      if (weights) {
        // Lane j's weight comes from the rank owning its expert: the returned block whose master lane is that rank's.
        for (int j = 0; j < K; ++j) {
          if (topk[j] < 0) continue;
          const int owner = int(topk[j] / El);
          int owner_master = -1;
          for (int k = 0; k < K; ++k)
            if (topk[k] >= 0 && topk[k] / El == owner) owner_master = k;
          for (const Returned* r : returned)
            if (r->master_lane == owner_master) out.combined_topk_weights[size_t(t) * K + j] = r->weights[j];
        }
      }
      for (int c = 0; c < hidden; ++c) out.combined_x[size_t(t) * hidden + c] = fmt::float_to_bf16(acc[c]);
    }
  }
  return outputs;
}

}  // namespace symmoe::ref
