// Hybrid (scale-out) EP plan: buffer sizes per rank, bytes each rank moves over the network (RDMA) and NVLink per
// dispatch/combine call, and the time a stated bandwidth model predicts, for N nodes of G = R / N GPUs.
// The protocol it sizes is the golden model's (include/symmoe/reference/hybrid.hpp); docs/scale-out.md is the design.
//
// Contract:
// * Pure functions of their arguments (no SYMMOE_ overrides: nothing here launches a kernel).
// * Traffic is the EXPECTED value per rank under uniform routing (K distinct experts per token, uniformly; with
//   node_limit M, first M distinct nodes uniformly, then K distinct experts among theirs: DeepSeek-V3's
//   node-limited routing), every rank holding T_max tokens. Buffers are the worst case, so a call never overflows.
// * Local copies (a rank to itself, a source to its own node's forwarder) are not network or NVLink traffic.
// * validate() and plan_hybrid() throw symmoe::Error naming the argument (nodes, ranks, node_limit, ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "symmoe/layout/ep.hpp"
#include "symmoe/shape.hpp"

namespace symmoe::plan {

// The bandwidth model of every estimate, per GPU and direction. Printed with each plan.
struct HybridBandwidthModel {
  // One 400 Gb/s NIC per GPU (8 per node, ConnectX-7 class): 50 GB/s line rate; DeepEP quotes ~50 GB/s for CX7.
  double nic_gbps = 50.0;
  // NVLink push ceiling measured on our H200s (bench ep, ceiling_gbps 363.3; the run: docs/notes/ep.md).
  double nvlink_gbps = 363.0;
  // One-way latency of a GPU-initiated network put through one switch: assumed (no NICs here to measure it).
  double rdma_latency_us = 3.0;
  // Cross-rank NVLink barrier, measured (README runtime row: 1.44 us).
  double nvlink_barrier_us = 1.44;
  std::string to_string() const;
};

struct HybridDims {
  int hidden = 0, num_experts = 0, num_topk = 0;
  int num_ranks = 1, num_nodes = 1, num_max_tokens_per_rank = 0;
  layout::TokenDtype dtype = layout::TokenDtype::kFp8E4m3;
  int node_limit = 0;  // M: max distinct nodes per token (DeepSeek-V3 routing: 4); 0 = unlimited
  static HybridDims from_shape(const MoeShape& shape, int num_nodes, layout::TokenDtype dtype, int node_limit = 0);
  int ranks_per_node() const { return num_ranks / num_nodes; }
  void validate() const;
};

// Largest hybrid deployment planned for: DeepEP V2's EP2048; GPUs per node: one Hopper NVLink domain (HGX, 8).
constexpr int kHybridMaxRanks = 2048;
constexpr int kHybridMaxRanksPerNode = 8;

// Probabilities per token under the routing model (see the contract): a given rank / node holds >= 1 of its lanes.
struct HybridRouting {
  double p_rank = 0, p_node = 0;
  double ranks_per_token = 0;  // R * p_rank: distinct destination ranks of a token
  double nodes_per_token = 0;  // N * p_node: distinct destination nodes of a token
};
HybridRouting hybrid_routing(const HybridDims& dims);

struct HybridPlan {
  HybridDims dims;
  HybridBandwidthModel model;
  HybridRouting routing;
  uint32_t record_bytes = 0;       // one dispatch record (layout::TokenRecord stride): both hops carry it
  uint32_t combine_row_bytes = 0;  // one bf16 combine row (H * 2)

  // Buffers per rank (bytes, worst case), in the order a dispatch/combine uses them.
  uint64_t scaleout_send_bytes = 0;         // T_max records: the registered source of the network puts
  uint64_t scaleout_recv_bytes = 0;         // N * T_max records: [source node][slot] on the forwarder
  uint64_t scaleup_recv_bytes = 0;          // R * T_max records: [forwarder][source node * T_max + slot]
  uint64_t forward_combine_recv_bytes = 0;  // N * T_max * min(G, K) rows: a record's rows from its node's ranks
  uint64_t forward_reduce_bytes = 0;        // N * T_max rows: node partials (node-reduced combine only)
  uint64_t source_combine_recv_bytes = 0;   // T_max * K rows: [token][lane] on the source
  uint64_t signal_bytes = 0;                // count exchange (double-buffered) and per-source-node tails
  uint64_t total_bytes() const;

  // Expected bytes each rank sends per call (receives the same in expectation).
  double dispatch_rdma_bytes = 0;         // T (N-1) p_node records
  double dispatch_nvlink_bytes = 0;       // T (R-N) p_rank records (as forwarder)
  double dispatch_direct_rdma_bytes = 0;  // T (R-G) p_rank records: no forwarding (every remote rank directly)
  double combine_nvlink_bytes = 0;        // T (R-N) p_rank rows (destination -> forwarder)
  double combine_rdma_bytes = 0;          // T (R-G) p_rank rows: exact order (forwarder does not reduce)
  double combine_reduced_rdma_bytes = 0;  // T (N-1) p_node rows: forwarder sums its node's rows (not bitwise)

  // Predicted times (us): fixed latency + the slower of the two links (the hops pipeline).
  double dispatch_us = 0, combine_us = 0, combine_reduced_us = 0;
  // Logical network bandwidth as DeepEP reports it (tokens to every node incl. its own / time).
  double dispatch_logical_rdma_gbps = 0, combine_logical_rdma_gbps = 0, combine_reduced_logical_rdma_gbps = 0;

  std::string to_string() const;  // " | "-separated groups, as the other plans
  void validate() const;
};

HybridPlan plan_hybrid(const HybridDims& dims, const HybridBandwidthModel& model = {});

// DeepEP's published inter-node results (H800 + CX7 400 Gb/s), with their source; 0 where not published.
struct DeepEpPublished {
  const char* version;  // "V1 normal", "V1 low-latency", "V2"
  int num_ranks, tokens;
  double dispatch_gbps, combine_gbps;  // RDMA "bottleneck bandwidth"
  double dispatch_us, combine_us;
};
const std::vector<DeepEpPublished>& deepep_published();
const char* deepep_published_source();

// The sweep table `symmoe plan --nodes` prints: EP16..EP256 (8 GPUs per node) x the given tokens per rank, our
// predictions next to DeepEP's published numbers for the same EP size and token count.
std::string format_hybrid_sweep(const MoeShape& shape, const std::vector<int>& tokens_per_rank,
                                layout::TokenDtype dtype, int node_limit, const HybridBandwidthModel& model = {});

}  // namespace symmoe::plan
