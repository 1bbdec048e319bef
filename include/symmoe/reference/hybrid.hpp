// Golden model of hybrid (scale-out) EP dispatch and combine: DeepEP's hybrid mode, two hops per token
// (docs/scale-out.md §2, §3).
//
// Topology: R = N * G ranks, N nodes ("scale-out ranks") of G GPUs ("scale-up ranks"); rank r = node * G + local.
// A source rank s = (n_s, l_s) sends each token ONCE per destination node n over the network (RDMA) to the
// FORWARDER f = (n, l_s), the rank with the same local index on node n (for n == n_s the forwarder is s itself and
// the hop is a local copy); the forwarder sends it once per destination rank d = (n, l) over NVLink (for l == l_s a
// local copy). Combine runs the same two hops backwards. This model moves every row through those buffers, so the
// metadata below is exactly what each hop needs; it is not a re-labelled flat dispatch.
//
// Buffers (rows; a dispatch "record" is the token's x row, scale row, K expert ids, K weights and its
// src_token_global_idx, as DeepEP's TokenLayout with metadata):
//   scale-out receive on the forwarder: [N source nodes][T_max] records (region n_s, slot = the token's position
//     among the tokens s sends to node n, ascending token order);
//   scale-up receive on the destination: [G forwarders][N * T_max] records (region l_f, slot = position in the
//     order forwarder f forwards to d: source node, then scale-out slot).
//
// Results (this header is the spec a GPU hybrid kernel is compared with, BITWISE):
// * Every output of the flat model (dispatch.hpp: recv_x, recv_sf, recv_topk_idx, recv_topk_weights, the whole
//   EpHandle, expand layout and padding) is bitwise the flat model's for the same inputs: the destination places the
//   rows it received in the flat (deterministic) order, ascending src_token_global_idx.
// * combine, exact order (default): combined_x and combined_topk_weights bitwise equal the flat combine's, because
//   the forwarder does NOT reduce: it returns each destination rank's row(s) of a token unchanged and the source
//   adds them in ascending top-k lane order as the flat model does.
// * combine, reduce_at_forwarder: the forwarder sums the rows its node returned for the token (ascending lane, fp32)
//   and rounds once to bf16; the source starts from the biases and adds the node partials (fp32, ascending
//   node-master lane), then rounds once. One network row per (token, node) instead of per (token, rank), but a
//   different fp32 order: not bitwise the flat combine's (two bf16 roundings per node with more than one row).
//   combined_topk_weights are unchanged. docs/scale-out.md quantifies the trade.
//
// Hybrid metadata (HybridHandle, DeepEP's names where it has one; one channel, so DeepEP's per-channel split
// of the same arrays is absent):
//   source side      num_tokens_per_node [N]; dst_scaleout_slot_idx [T, K]: at the NODE-master lane (highest lane
//                    whose expert lives on node n) n_s * T_max + slot (the record's place in forwarder (n, l_s)'s
//                    scale-out receive buffer), other lanes -1.
//   forwarder side   psum_num_recv_tokens_per_scaleout_rank [N] inclusive prefix sum over source nodes of the records
//                    received; token_metadata_at_forward [num_forward_tokens, 2 + K], rows in (source node, slot)
//                    order: col 0 src_token_global_idx; col 1 n_s * K + node-master lane (the lane whose slot names
//                    the record on the source); col 2 + k at the master lane k of each destination rank (n, l) of the
//                    token: l * (N * T_max) + scale-up slot (where that rank received the record and where it writes
//                    the token's combine row on the forwarder), other columns -1.
//   destination side psum_num_recv_tokens_per_scaleup_rank [G] inclusive prefix sum over forwarders of the records
//                    received; channel_linked_list [num_recv_tokens]: for received row i (flat order) l_f * (N * T_max)
//                    + scale-up slot, i.e. where the record arrived and where combine returns the row on forwarder l_f.
// Traffic counters (what each rank put on each link, local copies excluded) feed the planner's cross-check.
#pragma once

#include <cstdint>
#include <vector>

#include "symmoe/reference/combine.hpp"
#include "symmoe/reference/dispatch.hpp"

namespace symmoe::ref {

// N nodes of G ranks. All index maps of the hybrid model go through here.
struct HybridTopology {
  int num_ranks = 1, num_nodes = 1;

  // Throws symmoe::Error naming the argument unless num_nodes >= 1 divides num_ranks.
  void validate() const;
  int ranks_per_node() const { return num_ranks / num_nodes; }  // G
  int node_of(int rank) const { return rank / ranks_per_node(); }
  int local_of(int rank) const { return rank % ranks_per_node(); }
  int rank_of(int node, int local) const { return node * ranks_per_node() + local; }
};

struct HybridHandle {
  int num_nodes = 1, ranks_per_node = 1;
  // source side
  std::vector<int32_t> num_tokens_per_node;    // [N]
  std::vector<int32_t> dst_scaleout_slot_idx;  // [T, K]
  // forwarder side
  int num_forward_tokens = 0;
  std::vector<int32_t> psum_num_recv_tokens_per_scaleout_rank;  // [N] inclusive
  std::vector<int32_t> token_metadata_at_forward;               // [num_forward_tokens, 2 + K]
  // destination side
  std::vector<int32_t> psum_num_recv_tokens_per_scaleup_rank;  // [G] inclusive
  std::vector<int32_t> channel_linked_list;                    // [num_recv_tokens]
};

// Records (dispatch) or returned rows (combine) each rank put on the network and on NVLink in one call.
struct HybridTraffic {
  int64_t rdma_records = 0;    // to another node: dispatch as source, combine as forwarder
  int64_t nvlink_records = 0;  // to another rank of this node: dispatch as forwarder, combine as destination
};

struct HybridDispatchOutput {
  DispatchOutput flat;  // recv_x ... and the flat EpHandle (bitwise the flat model's)
  HybridHandle hybrid;
  HybridTraffic traffic;  // this rank's sends: as source (RDMA) and as forwarder (NVLink)
};

// Fresh hybrid dispatch over all R ranks (inputs[s] for source s), N = topology.num_nodes. Bad input raises
// symmoe::Error before any output, with the flat model's messages (dispatch.hpp) or naming num_nodes.
std::vector<HybridDispatchOutput> hybrid_dispatch(const DispatchConfig& config, int num_nodes,
                                                  const std::vector<DispatchInput>& inputs);

// Cached hybrid dispatch: both hops replayed from the handles of a previous hybrid dispatch (handles[r] its flat
// EpHandle, hybrid[r] its HybridHandle) with the same topk_idx (x may differ): bitwise the fresh dispatch's outputs
// and traffic. Throws symmoe::Error if an input's topk_idx differs from its handle's copy, or a handle names a
// position that holds no record or another token's.
std::vector<HybridDispatchOutput> hybrid_dispatch_cached(const std::vector<EpHandle>& handles,
                                                         const std::vector<HybridHandle>& hybrid,
                                                         const std::vector<DispatchInput>& inputs,
                                                         bool zero_padding = true);

struct HybridCombineOutput {
  CombineOutput flat;     // bitwise the flat combine's
  HybridTraffic traffic;  // returned rows: NVLink from the destination, RDMA from the forwarder
};

// Hybrid combine driven by the handles of a hybrid dispatch (handles[r] = its flat EpHandle, hybrid[r] = its
// HybridHandle); inputs as the flat combine takes. Rows are located through the hybrid metadata only
// (channel_linked_list, token_metadata_at_forward, dst_scaleout_slot_idx), never through the flat slots.
std::vector<HybridCombineOutput> hybrid_combine(const std::vector<EpHandle>& handles,
                                                const std::vector<HybridHandle>& hybrid, int hidden,
                                                const std::vector<CombineInput>& inputs,
                                                const CombineOptions& options = {}, bool reduce_at_forwarder = false);

}  // namespace symmoe::ref
