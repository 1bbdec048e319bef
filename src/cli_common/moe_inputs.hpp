// Device copies of the MoE layer's per-rank inputs (x FP8 + per-128 scales, top-k routing) and outputs for
// `symmoe bench moe` and `symmoe run` on the GPUs, a fast host generator of benchmark inputs, and the traffic
// counts their metrics divide by.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/device_block.hpp"
#include "symmoe/moe.hpp"
#include "symmoe/reference/mlp.hpp"

namespace symmoe {
class MegaMoe;
}

namespace symmoe::cli {

// Buffers for T_max tokens on every local rank (x, scales, topk_idx, topk_weights, y).
class DeviceLayerInputs {
 public:
  DeviceLayerInputs(const Communicator& comm, const MoeShape& shape);
  DeviceLayerInputs(const DeviceLayerInputs&) = delete;
  DeviceLayerInputs& operator=(const DeviceLayerInputs&) = delete;

  // host[i] for local rank i (Communicator::local_ranks() order); returns the forward arguments (y included).
  std::vector<MoeForwardArgs> upload(const std::vector<ref::MoeLayerInput>& host);
  const std::vector<MoeForwardArgs>& args() const { return args_; }

 private:
  const Communicator& comm_;
  MoeShape shape_;
  std::vector<runtime::DeviceBlock> blocks_;  // one per local rank (layout::LayerInputsLayout)
  std::vector<MoeForwardArgs> args_;
};

// Copies every local rank's inputs of `args` (x, x_scales, topk_idx, topk_weights; num_tokens rows) into the fused
// layer's workspace (MegaMoe::input, where its peers pull from) and returns args pointing there (y, stream kept):
// a forward on them skips the copy-in, so the fused layer is timed on the same footing as the composed one.
std::vector<MoeForwardArgs> stage_in_mega_workspace(const Communicator& comm, const MoeShape& shape,
                                                    const MegaMoe& layer, const std::vector<MoeForwardArgs>& args);

// Benchmark input of one rank: x codes e4m3(448 u), u uniform in [-1, 1) from the synthetic hash, scales 2/448
// (x ~ U(-2, 2)); routing from ref::make_routing(options, rank). ~10x faster than ref::make_random_layer_input.
ref::MoeLayerInput fast_layer_input(const MoeShape& shape, int num_tokens, const ref::RoutingOptions& options,
                                    int rank);

// What one destination rank does in a layer call, from the routings of ALL ranks (the recv_pairs of
// docs/design.md §10.2).
struct RankTraffic {
  long long recv_pairs = 0;          // (token, expert) pairs this rank computes
  int experts_touched = 0;           // local experts with >= 1 pair
  long long remote_recv_tokens = 0;  // dispatch: (token, this rank) records from OTHER ranks
  long long remote_return_rows = 0;  // combine (expand): rows this rank sends back to OTHER ranks
  double flops(const MoeShape& s) const { return 2.0 * double(recv_pairs) * s.hidden * s.intermediate * 3; }
  // Touched weights (in format f) + FP8 rows in (x + scales) + bf16 rows out.
  double hbm_bytes(const MoeShape& s, gemm::WeightFormat f = gemm::WeightFormat::kFp8) const;
  // Touched weights alone (incl. scales, + codes for FP4; MoeWeightStore::expert_bytes): what a memory-bound call
  // must stream at least once.
  double weight_bytes(const MoeShape& s, gemm::WeightFormat f = gemm::WeightFormat::kFp8) const;
  // Token records in (x + scales + K idx/weights) + bf16 rows back.
  double nvl_bytes(const MoeShape& s) const;
};
RankTraffic rank_traffic(const MoeShape& shape, const std::vector<ref::Routing>& routings, int rank);

}  // namespace symmoe::cli
