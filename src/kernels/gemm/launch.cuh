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
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(num_ctas);
  config.blockDim = dim3(kNumThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = kClusterM;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  if constexpr (kFp4) {
    auto* kernel = grouped_gemm_fp4_kernel<BLOCK_M, BLOCK_N, kNumStages, kEpilogue>;
    SYMMOE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    SYMMOE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, params, maps.a, maps.sfa, maps.b, maps.b_codes));
    SYMMOE_CUDA_CHECK_LAUNCH("grouped_gemm_fp4_kernel");
  } else {
    auto* kernel = grouped_gemm_kernel<BLOCK_M, BLOCK_N, kNumStages, kClusterM, kEpilogue, kTileBuffer>;
    SYMMOE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    if constexpr (kClusterM > 1) {
      // Persistent grid: every CTA must be resident at once. Clusters need kClusterM free SMs in one GPC, so
      // fewer than num_sms / kClusterM clusters may fit (GPCs with an odd SM count); launching more would run the
      // extra clusters as a second wave.
      int max_clusters = 0;
      SYMMOE_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&max_clusters, kernel, &config));
      if (max_clusters > 0) config.gridDim.x = std::min(num_ctas, max_clusters * kClusterM);
    }
    SYMMOE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, params, maps.a, maps.sfa, maps.b));
    SYMMOE_CUDA_CHECK_LAUNCH("grouped_gemm_kernel");
  }
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
