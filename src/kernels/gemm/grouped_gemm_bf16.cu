// Compiled two-halves grouped GEMM kernels with the bf16 epilogue and 128-column warpgroup tiles (128 x 128, 64 x 256;
// entries of plan::kGemmKernels; the dispatcher over all of them: src/gemm/kernel_dispatch.cpp).
#include "kernels/gemm/launch.cuh"

namespace symmoe::gemm::kernel {

namespace {
constexpr bool is_bf16_narrow(const plan::GemmKernelShape& s) {
  return s.weights == plan::GemmWeights::kFp8 && s.epilogue == EpilogueKind::kBf16 &&
         s.core == plan::GemmCore::kTwoHalves && !(s.block_m == 128 && s.block_n == 256);
}
}  // namespace

bool launch_bf16_narrow(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas,
                        cudaStream_t stream) {
  return launch_one_of<is_bf16_narrow, 0, 1>(index, params, maps, num_ctas, stream);
}

}  // namespace symmoe::gemm::kernel
