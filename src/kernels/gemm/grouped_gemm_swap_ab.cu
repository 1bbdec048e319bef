// Compiled swap-AB core kernels (swap_ab_kernel.cuh; the kSwapAB entries of plan::kGemmKernels): 16 / 32 / 64 tokens
// x 128 or 256 weight rows with bf16 output, x 256 with the SwiGLU + FP8 output; FP8 and FP4 weights.
#include "kernels/gemm/launch.hpp"
#include "kernels/gemm/swap_ab_kernel.cuh"
#include "symmoe/cuda_check.hpp"

namespace symmoe::gemm::kernel {

namespace {

template <int kIndex>
void launch_swap_ab_entry(const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream) {
  constexpr plan::GemmKernelShape s = plan::kGemmKernels[kIndex];
  constexpr bool kFp4 = s.weights == plan::GemmWeights::kFp4;
  static_assert(s.core == plan::GemmCore::kSwapAB && (s.block_n == 256 || s.epilogue == EpilogueKind::kBf16) &&
                    s.cluster_size == 1 && !s.tile_buffer,
                "a swap-AB core entry: block_m x 128 or 256 (bf16 output) or x 256 (SwiGLU), cluster 1");
  PersistentLaunch launch(num_ctas, kSwapAbNumThreads,
                          SwapAbSmemLayout<s.block_m, s.block_n, s.num_stages, kFp4>::kDynamicBytes, 1, stream);
  launch.run(grouped_gemm_swap_ab_kernel<s.block_m, s.block_n, s.num_stages, kFp4, s.epilogue>,
             "grouped_gemm_swap_ab_kernel", params, maps.a, maps.sfa, maps.b, maps.b_codes);
}

template <int... kIndices>
bool launch_swap_ab_one_of(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas,
                           cudaStream_t stream) {
  return ((index == kIndices && (launch_swap_ab_entry<kIndices>(params, maps, num_ctas, stream), true)) || ...);
}

}  // namespace

bool launch_swap_ab(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas,
                    cudaStream_t stream) {
  return launch_swap_ab_one_of<14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31>(
      index, params, maps, num_ctas, stream);
}

}  // namespace symmoe::gemm::kernel
