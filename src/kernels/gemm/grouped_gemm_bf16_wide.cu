// Compiled grouped GEMM kernels with the bf16 epilogue and 128 x 256 tiles (entries of plan::kGemmKernels), with
// and without the whole-slice epilogue buffer (epilogue_tile_buffer.cuh).
#include "kernels/gemm/launch.cuh"

namespace symmoe::gemm::kernel {

namespace {
constexpr bool is_bf16_wide(const plan::GemmKernelShape& s) {
  return s.weights == plan::GemmWeights::kFp8 && s.epilogue == EpilogueKind::kBf16 && s.block_m == 128 &&
         s.block_n == 256;
}
}  // namespace

bool launch_bf16_wide(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas,
                      cudaStream_t stream) {
  return launch_one_of<is_bf16_wide, 2, 3>(index, params, maps, num_ctas, stream);
}

}  // namespace symmoe::gemm::kernel
