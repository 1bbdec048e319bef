// Expert weights of the MoE layer on the GPUs: the per-rank device view the layers read (MoeRankWeights) and an
// owning store that fills it, from host golden-model weights or with synthetic weights (their definition, and the
// host copy of any one expert, are in symmoe/moe_weights.hpp). Two weight formats (gemm::WeightFormat):
//
// FP8 (format kFp8), device layout of one rank (El = E / R local experts, global expert of local e = rank * El + e),
// all row major:
//   w1         e4m3 [El, 2I, H]   L1 (gate/up) after gemm::transform_l1_weights: rows interleaved by 8
//   w1_scales  fp32 [El, I/128, H/128, 2]   (transformed: (gate, up) block pairs)
//   w2         e4m3 [El, H, I]    L2
//   w2_scales  fp32 [El, H/128, I/128]
//   w1_scale_codes, w2_scale_codes: null
// FP4 (format kFp4): E2M1 weights with a UE8M0 scale per row per 32 columns, as gemm::transform_l1_weights_fp4 /
// transform_l2_weights_fp4 produce them (symmoe/weight_transform_fp4.hpp), per expert back to back:
//   w1              E2M1 [El, 2I, H/2] in the transform's word layout, rows interleaved by 8 as the FP8 w1
//   w1_scale_codes  int32 [El, H/128, 2I]   four UE8M0 codes per word, MN-major, rows interleaved the same way
//   w1_scales       fp32 [El, I/128, H/128, 2]   the fold's base scales (fp4_fold.hpp), the FP8 w1_scales layout
//   w2              E2M1 [El, H, I/2] in the same word layout
//   w2_scale_codes  int32 [El, I/128, H]
//   w2_scales       fp32 [El, H/128, I/128]   base scales, the FP8 w2_scales layout
// A layer on FP4 weights computes what it computes on the FP8 weights gemm::expand_l{1,2}_fp4 make of them (the
// FP4 GEMM upconverts exactly in shared memory), bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "symmoe/gemm.hpp"
#include "symmoe/runtime.hpp"
#include "symmoe/shape.hpp"

namespace symmoe {

namespace ref {
struct ExpertWeights;                                        // symmoe/reference/mlp.hpp
using ExpertWeightMap = std::map<int, ExpertWeights>;        // the same alias as there
struct ExpertWeightsFp4;                                     // symmoe/reference/fp4.hpp
using ExpertWeightMapFp4 = std::map<int, ExpertWeightsFp4>;  // the same alias as there
}  // namespace ref

// One local rank's experts (device memory on the rank's device; non-owning view).
struct MoeRankWeights {
  const uint8_t* w1 = nullptr;
  const float* w1_scales = nullptr;
  const uint8_t* w2 = nullptr;
  const float* w2_scales = nullptr;
  gemm::WeightFormat format = gemm::WeightFormat::kFp8;
  const uint32_t* w1_scale_codes = nullptr;  // kFp4 only (required there, null for kFp8)
  const uint32_t* w2_scale_codes = nullptr;  // kFp4 only
};

// Host check of one rank's view for `layer` ("moe", "mega"): a known format, the four pointers, the codes exactly
// when the format is kFp4. Throws symmoe::Error naming the rank and the field.
void check_rank_weights(const MoeRankWeights& w, int rank, const char* layer);

// Owns every local rank's expert weights (one allocation per rank on its device).
class MoeWeightStore {
 public:
  // GPU-generated synthetic FP8 weights (symmoe/moe_weights.hpp); asynchronous on each rank's stream, then
  // synchronised.
  static MoeWeightStore synthetic(const Communicator& comm, const MoeShape& shape, uint64_t seed);
  // Host golden-model FP8 weights (original layout) for EVERY expert 0..E-1, transformed and uploaded.
  static MoeWeightStore from_host(const Communicator& comm, const MoeShape& shape, const ref::ExpertWeightMap& w);
  // Host FP4 weights (ref::ExpertWeightsFp4, original layout: W1 [2I, H] gate rows then up rows, W2 [H, I]) for
  // every expert of the local ranks: checked (shapes, scale blocks within the fold's exact range; symmoe::Error
  // names the expert and the matrix), transformed (transform_l{1,2}_weights_fp4) and uploaded.
  static MoeWeightStore from_host_fp4(const Communicator& comm, const MoeShape& shape,
                                      const ref::ExpertWeightMapFp4& w);
  // Synthetic FP4 weights (synthetic::host_expert_fp4, symmoe/moe_weights.hpp), generated on the host (all host
  // cores), transformed and uploaded; seconds for the model shapes.
  static MoeWeightStore synthetic_fp4(const Communicator& comm, const MoeShape& shape, uint64_t seed);

  MoeWeightStore();
  MoeWeightStore(MoeWeightStore&&) noexcept;
  MoeWeightStore& operator=(MoeWeightStore&&) noexcept;
  ~MoeWeightStore();

  gemm::WeightFormat format() const;
  std::vector<MoeRankWeights> views() const;  // Communicator::local_ranks() order
  // Bytes of one expert's weights (data + scales, + codes for FP4), for bandwidth metrics.
  static size_t expert_bytes(const MoeShape& shape, gemm::WeightFormat format = gemm::WeightFormat::kFp8);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace symmoe
