// Compiled one-batch core kernels (core_kernel.cuh; entries 10-13 and 32-35 of plan::kGemmKernels): 128 x 192 and
// 128 x 128 tiles with bf16 output and the 128 x 256 SwiGLU + FP8 tile, at clusters of 1 and 2; the split-N 64 x 256
// tiles (bf16, SwiGLU + FP8) at cluster 1.
#include "kernels/gemm/core_kernel.cuh"
#include "kernels/gemm/launch.hpp"
#include "symmoe/cuda_check.hpp"

namespace symmoe::gemm::kernel {

namespace {

constexpr bool is_core(const plan::GemmKernelShape& s) { return s.core == plan::GemmCore::kOneBatch; }

template <int kIndex>
void launch_core_entry(const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream) {
  constexpr plan::GemmKernelShape s = plan::kGemmKernels[kIndex];
  static_assert(is_core(s) && (s.block_m == 128 || (s.block_m == 64 && s.cluster_size == 1)) &&
                    s.weights == plan::GemmWeights::kFp8 && !s.tile_buffer,
                "a one-batch core entry: 128 x block_n or the split-N 64 x 256 at cluster 1, FP8 weights");
  PersistentLaunch launch(
      num_ctas, kCoreNumThreads,
      CoreSmemLayout<s.block_m, s.block_n, s.num_stages, plan::gemm_core_tile_output(s.epilogue)>::kDynamicBytes,
      s.cluster_size, stream);
  launch.run(grouped_gemm_core_kernel<s.block_m, s.block_n, s.num_stages, s.cluster_size, s.epilogue>,
             "grouped_gemm_core_kernel", params, maps.a, maps.sfa, maps.b, maps.d);
}

template <int... kIndices>
bool launch_core_one_of(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas,
                        cudaStream_t stream) {
  return ((index == kIndices && (launch_core_entry<kIndices>(params, maps, num_ctas, stream), true)) || ...);
}

}  // namespace

bool launch_core(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream) {
  return launch_core_one_of<10, 11, 12, 13, 32, 33, 34, 35>(index, params, maps, num_ctas, stream);
}

}  // namespace symmoe::gemm::kernel
