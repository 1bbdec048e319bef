// Expert weights of the MoE layer on the GPUs: the per-rank device view the layers read (MoeRankWeights) and an
// owning store that fills it, from host golden-model weights or with synthetic weights generated on the GPU (their
// definition, and the host copy of any one expert, are in symmoe/moe_weights.hpp).
//
// Device layout of one rank (El = E / R local experts, global expert of local e = rank * El + e), all row major:
//   w1         e4m3 [El, 2I, H]   L1 (gate/up) after gemm::transform_l1_weights: rows interleaved by 8
//   w1_scales  fp32 [El, I/128, H/128, 2]   (transformed: (gate, up) block pairs)
//   w2         e4m3 [El, H, I]    L2
//   w2_scales  fp32 [El, H/128, I/128]
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "symmoe/runtime.hpp"
#include "symmoe/shape.hpp"

namespace symmoe {

namespace ref {
struct ExpertWeights;                                  // symmoe/reference/mlp.hpp
using ExpertWeightMap = std::map<int, ExpertWeights>;  // the same alias as there
}  // namespace ref

// One local rank's experts (device memory on the rank's device; non-owning view).
struct MoeRankWeights {
  const uint8_t* w1 = nullptr;
  const float* w1_scales = nullptr;
  const uint8_t* w2 = nullptr;
  const float* w2_scales = nullptr;
};

// Owns every local rank's expert weights (one allocation per rank on its device).
class MoeWeightStore {
 public:
  // GPU-generated synthetic weights (symmoe/moe_weights.hpp); asynchronous on each rank's stream, then synchronised.
  static MoeWeightStore synthetic(const Communicator& comm, const MoeShape& shape, uint64_t seed);
  // Host golden-model weights (original layout) for EVERY expert 0..E-1, transformed and uploaded.
  static MoeWeightStore from_host(const Communicator& comm, const MoeShape& shape, const ref::ExpertWeightMap& w);

  MoeWeightStore();
  MoeWeightStore(MoeWeightStore&&) noexcept;
  MoeWeightStore& operator=(MoeWeightStore&&) noexcept;
  ~MoeWeightStore();

  std::vector<MoeRankWeights> views() const;  // Communicator::local_ranks() order
  // Bytes of one expert's weights (data + scales), for bandwidth metrics.
  static size_t expert_bytes(const MoeShape& shape);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace symmoe
