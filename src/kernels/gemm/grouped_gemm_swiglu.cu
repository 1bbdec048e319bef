// Compiled grouped GEMM kernels with the L1 (SwiGLU + FP8) epilogue (entries of plan::kGemmKernels).
#include "kernels/gemm/launch.cuh"

namespace symmoe::gemm::kernel {

namespace {
constexpr bool is_swiglu(const plan::GemmKernelShape& s) {
  return s.weights == plan::GemmWeights::kFp8 && s.epilogue == EpilogueKind::kSwigluFp8;
}
}  // namespace

bool launch_swiglu(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream) {
  return launch_one_of<is_swiglu, 4, 5>(index, params, maps, num_ctas, stream);
}

}  // namespace symmoe::gemm::kernel
