// The dispatcher over the compiled grouped-GEMM kernels (plan::kGemmKernels): finds the entry of a planned kernel
// shape and hands it to the file that compiled it (src/kernels/gemm/grouped_gemm_*.cu).
#include <string>

#include "kernels/gemm/launch.hpp"
#include "plan/gemm_kernels.hpp"
#include "symmoe/common.hpp"

namespace symmoe::gemm::kernel {

// The six files' shares cover the table: 2 narrow bf16 (0-1), 2 wide bf16 (2-3), 2 SwiGLU (4-5), 4 FP4 (6-9),
// 8 one-batch core (10-13, 32-35), 18 swap-AB core (14-31).
static_assert(plan::kNumGemmKernels == 36, "plan::kGemmKernels changed: update the launch_one_of index lists");

std::string kernel_name(const plan::GemmKernelShape& s) {
  return "GemmKernel{block " + std::to_string(s.block_m) + "x" + std::to_string(s.block_n) + "x128, stages " +
         std::to_string(s.num_stages) + ", cluster " + std::to_string(s.cluster_size) + ", epilogue " +
         plan::gemm_epilogue_name(s.epilogue) + (s.tile_buffer ? ", tile buffer" : "") +
         (s.core != plan::GemmCore::kTwoHalves ? std::string(", ") + plan::gemm_core_name(s.core) + " core" : "") +
         (s.weights == plan::GemmWeights::kFp4 ? ", fp4 weights" : "") + "}";
}

void launch_grouped_gemm(const plan::GemmKernelShape& shape, const GemmParams& params, const GemmTensorMaps& maps,
                         int num_ctas, cudaStream_t stream) {
  SYMMOE_CHECK(num_ctas > 0 && num_ctas % shape.cluster_size == 0, "gemm", "num_ctas must be a positive multiple of ",
               shape.cluster_size, ", got ", num_ctas);
  int index = -1;
  for (int i = 0; i < plan::kNumGemmKernels; ++i) {
    const plan::GemmKernelShape& k = plan::kGemmKernels[i];
    if (k.block_m == shape.block_m && k.block_n == shape.block_n && k.num_stages == shape.num_stages &&
        k.cluster_size == shape.cluster_size && k.epilogue == shape.epilogue && k.tile_buffer == shape.tile_buffer &&
        k.weights == shape.weights && k.core == shape.core)
      index = i;
  }
  SYMMOE_CHECK(index >= 0, "gemm", "no compiled kernel for ", kernel_name(shape));
  const bool launched =
      launch_bf16_narrow(index, params, maps, num_ctas, stream) ||
      launch_bf16_wide(index, params, maps, num_ctas, stream) || launch_swiglu(index, params, maps, num_ctas, stream) ||
      launch_fp4(index, params, maps, num_ctas, stream) || launch_core(index, params, maps, num_ctas, stream) ||
      launch_swap_ab(index, params, maps, num_ctas, stream);
  SYMMOE_CHECK(launched, "gemm", "plan::kGemmKernels entry ", index, " (", kernel_name(shape),
               ") is compiled in no file");
}

}  // namespace symmoe::gemm::kernel
