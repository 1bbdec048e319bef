// Launch of one compiled grouped GEMM configuration (included by the instantiating .cu files only).
#pragma once

#include "kernels/gemm/grouped_gemm_fp4_kernel.cuh"
#include "kernels/gemm/grouped_gemm_kernel.cuh"
#include "kernels/gemm/launch.hpp"
#include "symmoe/cuda_check.hpp"

#include <algorithm>
#include <type_traits>
#include <utility>

namespace symmoe::gemm::kernel {

template <int BLOCK_M, int BLOCK_N, int kNumStages, int kClusterM, EpilogueKind kEpilogue, bool kTileBuffer, bool kFp4>
void launch_config(const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream) {
  static_assert(!kFp4 || (kClusterM == 1 && !kTileBuffer), "FP4 weights: cluster 1, slab staging");
  constexpr int kSmemBytes =
      std::conditional_t<kFp4, GroupedGemmFp4SmemLayout<BLOCK_M, BLOCK_N, kNumStages>,
                         GroupedGemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kTileBuffer>>::kDynamicBytes;
  PersistentLaunch launch(num_ctas, kNumThreads, kSmemBytes, kClusterM, stream);
  if constexpr (kFp4)
    launch.run(grouped_gemm_fp4_kernel<BLOCK_M, BLOCK_N, kNumStages, kEpilogue>, "grouped_gemm_fp4_kernel", params,
               maps.a, maps.sfa, maps.b, maps.b_codes);
  else
    launch.run(grouped_gemm_kernel<BLOCK_M, BLOCK_N, kNumStages, kClusterM, kEpilogue, kTileBuffer>,
               "grouped_gemm_kernel", params, maps.a, maps.sfa, maps.b);
}

// Entry kIndex of plan::kGemmKernels.
template <int kIndex>
void launch_entry(const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream) {
  constexpr plan::GemmKernelShape s = plan::kGemmKernels[kIndex];
  launch_config<s.block_m, s.block_n, s.num_stages, s.cluster_size, s.epilogue, s.tile_buffer,
                s.weights == plan::GemmWeights::kFp4>(params, maps, num_ctas, stream);
}

// Launches entry `index` if it is one of kIndices (the calling file's share of plan::kGemmKernels), whose entries
// must all satisfy `belongs` (so every entry is compiled in exactly one file).
using KernelPredicate = bool (*)(const plan::GemmKernelShape&);
template <KernelPredicate kBelongs, int... kIndices>
bool launch_one_of(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream) {
  static_assert((kBelongs(plan::kGemmKernels[kIndices]) && ...), "a kernel entry compiled in the wrong file");
  return ((index == kIndices && (launch_entry<kIndices>(params, maps, num_ctas, stream), true)) || ...);
}

}  // namespace symmoe::gemm::kernel
