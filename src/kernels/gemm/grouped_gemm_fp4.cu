// Compiled grouped GEMM kernels with FP4 weights (grouped_gemm_fp4_kernel.cuh; entries of plan::kGemmKernels):
// 64 x 256 and 128 x 256 tiles, bf16 and L1 (SwiGLU + FP8) epilogues.
#include "kernels/gemm/launch.cuh"

namespace symmoe::gemm::kernel {

namespace {
constexpr bool is_fp4(const plan::GemmKernelShape& s) { return s.weights == plan::GemmWeights::kFp4; }
}  // namespace

bool launch_fp4(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream) {
  return launch_one_of<is_fp4, 6, 7, 8, 9>(index, params, maps, num_ctas, stream);
}

}  // namespace symmoe::gemm::kernel
