// Hybrid (scale-out) EP plan. See include/symmoe/plan_hybrid.hpp; docs/scale-out.md uses its output.
//
// NOTES: every traffic figure is (tokens) x (expected records or rows per token) x (bytes per record or row); the
// expected counts per token come from hybrid_routing() alone, so one probability changes every line consistently.
// The golden model's traffic counters (reference/hybrid.hpp) measure the same counts on sampled routings; a CPU test
// holds the two together.
#include "symmoe/plan_hybrid.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "symmoe/common.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::plan {
namespace {

// P(none of K distinct experts drawn uniformly from `pool` falls in a given set of `set` experts).
double miss_probability(int pool, int set, int K) {
  double q = 1.0;
  for (int i = 0; i < K; ++i) q *= double(pool - set - i) / double(pool - i);
  return std::max(q, 0.0);
}

// bytes / (GB/s) in microseconds.
double transfer_us(double bytes, double gbps) { return bytes / (gbps * 1e3); }

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string mib(double bytes) { return fixed(bytes / (1024.0 * 1024.0), 2) + " MiB"; }

}  // namespace

std::string HybridBandwidthModel::to_string() const {
  return detail::concat("NIC ", fixed(nic_gbps, 1), " GB/s per GPU (1 x 400 Gb/s, 8 per node), NVLink ",
                        fixed(nvlink_gbps, 1), " GB/s (measured ceiling), network latency ", fixed(rdma_latency_us, 2),
                        " us one-way (assumed), NVLink barrier ", fixed(nvlink_barrier_us, 2), " us (measured)");
}

HybridDims HybridDims::from_shape(const MoeShape& shape, int num_nodes, layout::TokenDtype dtype, int node_limit) {
  HybridDims d;
  d.hidden = shape.hidden, d.num_experts = shape.num_experts, d.num_topk = shape.num_topk;
  d.num_ranks = shape.num_ranks, d.num_nodes = num_nodes, d.num_max_tokens_per_rank = shape.num_max_tokens_per_rank;
  d.dtype = dtype, d.node_limit = node_limit;
  return d;
}

void HybridDims::validate() const {
  SYMMOE_CHECK(num_ranks >= 1 && num_ranks <= kHybridMaxRanks, "plan", "hybrid: ranks must be in [1, ", kHybridMaxRanks,
               "], got ", num_ranks);
  SYMMOE_CHECK(num_nodes >= 1 && num_ranks % num_nodes == 0, "plan", "hybrid: nodes (", num_nodes,
               ") must be >= 1 and divide ranks (", num_ranks, ")");
  SYMMOE_CHECK(ranks_per_node() <= kHybridMaxRanksPerNode, "plan", "hybrid: ranks / nodes = ", ranks_per_node(),
               " GPUs per node, expected <= ", kHybridMaxRanksPerNode, " (one Hopper NVLink domain); use more nodes");
  SYMMOE_CHECK(hidden > 0 && hidden % 128 == 0, "plan", "hybrid: hidden must be a positive multiple of 128, got ",
               hidden);
  SYMMOE_CHECK(num_experts > 0 && num_experts % num_ranks == 0, "plan", "hybrid: experts (", num_experts,
               ") must be a positive multiple of ranks (", num_ranks, ")");
  SYMMOE_CHECK(num_topk >= 1 && num_topk <= 32 && num_topk <= num_experts, "plan",
               "hybrid: top-k must be in [1, min(32, experts)], got ", num_topk);
  SYMMOE_CHECK(num_max_tokens_per_rank >= 1, "plan", "hybrid: tokens per rank must be >= 1, got ",
               num_max_tokens_per_rank);
  SYMMOE_CHECK(node_limit >= 0 && node_limit <= num_nodes, "plan",
               "hybrid: node_limit must be in [0, nodes = ", num_nodes, "], got ", node_limit);
  SYMMOE_CHECK(node_limit == 0 || node_limit * (num_experts / num_nodes) >= num_topk, "plan", "hybrid: node_limit ",
               node_limit, " x experts per node ", num_experts / num_nodes, " < top-k ", num_topk,
               ": a token cannot find its experts");
}

HybridRouting hybrid_routing(const HybridDims& d) {
  d.validate();
  const int N = d.num_nodes, E = d.num_experts, K = d.num_topk;
  const int per_node = E / N, per_rank = E / d.num_ranks;
  // Node-limited: a given node is among the M chosen with probability M / N; the K experts are then drawn from the
  // M nodes' experts. Unlimited is the same with M = N.
  const int M = d.node_limit == 0 ? N : d.node_limit;
  const int pool = M * per_node;
  const double chosen = double(M) / double(N);
  HybridRouting r;
  r.p_node = chosen * (1.0 - miss_probability(pool, per_node, K));
  r.p_rank = chosen * (1.0 - miss_probability(pool, per_rank, K));
  r.ranks_per_token = d.num_ranks * r.p_rank;
  r.nodes_per_token = N * r.p_node;
  return r;
}

uint64_t HybridPlan::total_bytes() const {
  return scaleout_send_bytes + scaleout_recv_bytes + scaleup_recv_bytes + forward_combine_recv_bytes +
         forward_reduce_bytes + source_combine_recv_bytes + signal_bytes;
}

HybridPlan plan_hybrid(const HybridDims& d, const HybridBandwidthModel& model) {
  d.validate();
  HybridPlan p;
  p.dims = d, p.model = model;
  p.routing = hybrid_routing(d);
  const uint64_t R = d.num_ranks, N = d.num_nodes, G = d.ranks_per_node(), K = d.num_topk;
  const uint64_t T = d.num_max_tokens_per_rank;
  p.record_bytes = layout::TokenRecord(d.hidden, d.num_topk, d.dtype).stride;
  p.combine_row_bytes = uint32_t(d.hidden) * 2;
  const uint64_t rec = p.record_bytes, row = p.combine_row_bytes;

  p.scaleout_send_bytes = T * rec;
  p.scaleout_recv_bytes = N * T * rec;
  p.scaleup_recv_bytes = R * T * rec;
  p.forward_combine_recv_bytes = N * T * std::min(G, K) * row;
  p.forward_reduce_bytes = N > 1 ? N * T * row : 0;
  p.source_combine_recv_bytes = T * K * row;
  // Count exchange as DeepEP's hybrid notify: per source node its G rank counts and E / N expert counts (int32),
  // double-buffered by call parity; plus one 8-byte tail (finish flag | count) per source node.
  p.signal_bytes = 2 * N * (G + uint64_t(d.num_experts) / N) * 4 + N * 8;

  const HybridRouting& r = p.routing;
  const double Td = double(T);
  p.dispatch_rdma_bytes = Td * double(N - 1) * r.p_node * double(rec);
  p.dispatch_nvlink_bytes = Td * double(R - N) * r.p_rank * double(rec);
  p.dispatch_direct_rdma_bytes = Td * double(R - G) * r.p_rank * double(rec);
  p.combine_nvlink_bytes = Td * double(R - N) * r.p_rank * double(row);
  p.combine_rdma_bytes = Td * double(R - G) * r.p_rank * double(row);
  p.combine_reduced_rdma_bytes = Td * double(N - 1) * r.p_node * double(row);

  // NOTES: the two hops pipeline (a forwarder starts on the first records that land), so a call costs the slower
  // link plus fixed latency: one barrier, and with a network hop the count exchange and the last record's flight.
  const double fixed_us = model.nvlink_barrier_us + (N > 1 ? 2 * model.rdma_latency_us : 0.0);
  auto call_us = [&](double rdma, double nvlink) {
    return fixed_us + std::max(transfer_us(rdma, model.nic_gbps), transfer_us(nvlink, model.nvlink_gbps));
  };
  p.dispatch_us = call_us(p.dispatch_rdma_bytes, p.dispatch_nvlink_bytes);
  p.combine_us = call_us(p.combine_rdma_bytes, p.combine_nvlink_bytes);
  p.combine_reduced_us = call_us(p.combine_reduced_rdma_bytes, p.combine_nvlink_bytes);
  const double logical_tokens = Td * r.nodes_per_token;
  p.dispatch_logical_rdma_gbps = logical_tokens * double(rec) / (p.dispatch_us * 1e3);
  p.combine_logical_rdma_gbps = logical_tokens * double(row) / (p.combine_us * 1e3);
  p.combine_reduced_logical_rdma_gbps = logical_tokens * double(row) / (p.combine_reduced_us * 1e3);
  p.validate();
  return p;
}

void HybridPlan::validate() const {
  dims.validate();
  SYMMOE_CHECK(record_bytes == layout::TokenRecord(dims.hidden, dims.num_topk, dims.dtype).stride, "plan",
               "hybrid: record_bytes ", record_bytes, " is not the token record's stride");
  SYMMOE_CHECK(routing.p_rank > 0 && routing.p_rank <= 1 && routing.p_node >= routing.p_rank && routing.p_node <= 1,
               "plan", "hybrid: routing probabilities out of range (p_rank ", routing.p_rank, ", p_node ",
               routing.p_node, ")");
  SYMMOE_CHECK(dispatch_rdma_bytes <= dispatch_direct_rdma_bytes + 1e-6, "plan",
               "hybrid: forwarding sends more network bytes (", dispatch_rdma_bytes, ") than direct sends (",
               dispatch_direct_rdma_bytes, ")");
  SYMMOE_CHECK(dispatch_us > 0 && combine_us > 0 && combine_reduced_us <= combine_us + 1e-9, "plan",
               "hybrid: time estimates out of order (dispatch ", dispatch_us, " us, combine ", combine_us,
               " us, node-reduced combine ", combine_reduced_us, " us)");
}

std::string HybridPlan::to_string() const {
  const HybridDims& d = dims;
  std::ostringstream os;
  os << "topology: " << d.num_ranks << " ranks = " << d.num_nodes << " nodes x " << d.ranks_per_node()
     << " GPUs, T_max " << d.num_max_tokens_per_rank << ", " << layout::token_dtype_name(d.dtype) << " dispatch, "
     << "routing uniform" << (d.node_limit ? detail::concat(", <= ", d.node_limit, " nodes per token") : "")
     << " | per token: " << fixed(routing.ranks_per_token, 3) << " ranks, " << fixed(routing.nodes_per_token, 3)
     << " nodes (p_rank " << fixed(routing.p_rank, 5) << ", p_node " << fixed(routing.p_node, 5) << ")"
     << " | record " << record_bytes << " B (layout::TokenRecord), combine row " << combine_row_bytes << " B"
     << " | buffers per rank (worst case): scale-out send " << format_bytes(scaleout_send_bytes) << ", scale-out recv "
     << format_bytes(scaleout_recv_bytes) << ", scale-up recv " << format_bytes(scaleup_recv_bytes)
     << ", forwarder combine recv " << format_bytes(forward_combine_recv_bytes) << ", node-reduce staging "
     << format_bytes(forward_reduce_bytes) << ", source combine recv " << format_bytes(source_combine_recv_bytes)
     << ", signals " << format_bytes(signal_bytes) << ", total " << format_bytes(total_bytes())
     << " | dispatch per rank per call: RDMA " << mib(dispatch_rdma_bytes) << ", NVLink " << mib(dispatch_nvlink_bytes)
     << " (direct, no forwarding: RDMA " << mib(dispatch_direct_rdma_bytes) << ")"
     << " | combine per rank per call: NVLink " << mib(combine_nvlink_bytes) << ", RDMA exact "
     << mib(combine_rdma_bytes) << ", RDMA node-reduced " << mib(combine_reduced_rdma_bytes)
     << " | model: " << model.to_string() << " | estimate: dispatch " << fixed(dispatch_us, 1) << " us, combine "
     << fixed(combine_us, 1) << " us (exact order), " << fixed(combine_reduced_us, 1)
     << " us (node-reduced); logical RDMA GB/s (DeepEP's "
     << "unit) dispatch " << fixed(dispatch_logical_rdma_gbps, 1) << ", combine " << fixed(combine_logical_rdma_gbps, 1)
     << " (node-reduced " << fixed(combine_reduced_logical_rdma_gbps, 1) << ")";
  return os.str();
}

const char* deepep_published_source() {
  return "github.com/deepseek-ai/DeepEP @0297fc80: docs/legacy.md (V1, H800 + CX7 400 Gb/s; normal: 4096 tokens, "
         "H 7168, top-4 groups, top-8, FP8 dispatch / BF16 combine; low-latency: 128 tokens, pure RDMA) and "
         "README.md (V2, SM90 + CX7, 8192 tokens, logical bandwidth incl. local-rank traffic)";
}

const std::vector<DeepEpPublished>& deepep_published() {
  static const std::vector<DeepEpPublished> table = {
      {"V1 normal", 16, 4096, 43, 43, 0, 0},
      {"V1 normal", 32, 4096, 58, 57, 0, 0},
      {"V1 normal", 64, 4096, 51, 50, 0, 0},
      {"V1 low-latency", 16, 128, 63, 74, 118, 195},
      {"V1 low-latency", 32, 128, 48, 53, 155, 273},
      {"V1 low-latency", 64, 128, 43, 46, 173, 314},
      {"V1 low-latency", 128, 128, 39, 39, 192, 369},
      {"V1 low-latency", 256, 128, 39, 40, 194, 360},
      {"V2", 16, 8192, 90, 81, 0, 0},
      {"V2", 32, 8192, 61, 61, 0, 0},
  };
  return table;
}

std::string format_hybrid_sweep(const MoeShape& shape, const std::vector<int>& tokens_per_rank,
                                layout::TokenDtype dtype, int node_limit, const HybridBandwidthModel& model) {
  std::ostringstream os;
  char line[320];
  std::snprintf(line, sizeof(line), "%5s %5s %6s | %10s %10s %9s | %10s %10s %9s %9s | %6s %6s %6s | %s\n", "EP",
                "nodes", "tokens", "disp RDMA", "disp NVL", "disp us", "comb RDMA", "comb NVL", "comb us", "reduc us",
                "d GB/s", "c GB/s", "r GB/s", "DeepEP published (dispatch / combine)");
  os << line;
  for (int tokens : tokens_per_rank) {
    for (int ranks : {16, 32, 64, 128, 256}) {
      MoeShape s = shape;
      s.num_ranks = ranks, s.num_max_tokens_per_rank = tokens;
      const int nodes = ranks / kHybridMaxRanksPerNode;
      const HybridPlan p = plan_hybrid(HybridDims::from_shape(s, nodes, dtype, std::min(node_limit, nodes)), model);
      std::string published = "-";
      for (const DeepEpPublished& x : deepep_published()) {
        if (x.num_ranks != ranks || x.tokens != tokens) continue;
        published =
            x.dispatch_us > 0
                ? detail::concat(x.version, ": ", fixed(x.dispatch_us, 0), " / ", fixed(x.combine_us, 0), " us (",
                                 fixed(x.dispatch_gbps, 0), " / ", fixed(x.combine_gbps, 0), " GB/s)")
                : detail::concat(x.version, ": ", fixed(x.dispatch_gbps, 0), " / ", fixed(x.combine_gbps, 0), " GB/s");
      }
      std::snprintf(line, sizeof(line),
                    "%5d %5d %6d | %10s %10s %9.1f | %10s %10s %9.1f %9.1f | %6.1f %6.1f %6.1f | %s\n", ranks, nodes,
                    tokens, mib(p.dispatch_rdma_bytes).c_str(), mib(p.dispatch_nvlink_bytes).c_str(), p.dispatch_us,
                    mib(p.combine_rdma_bytes).c_str(), mib(p.combine_nvlink_bytes).c_str(), p.combine_us,
                    p.combine_reduced_us, p.dispatch_logical_rdma_gbps, p.combine_logical_rdma_gbps,
                    p.combine_reduced_logical_rdma_gbps, published.c_str());
      os << line;
    }
  }
  os << "(per rank per call; RDMA/NVL = MiB sent; comb = exact order, reduc = node-reduced combine; d/c/r GB/s = "
        "logical RDMA bandwidth of dispatch / combine / node-reduced combine, DeepEP's unit)\nDeepEP source: "
     << deepep_published_source() << "\n";
  return os.str();
}

}  // namespace symmoe::plan
