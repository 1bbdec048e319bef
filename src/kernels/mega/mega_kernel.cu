// Compiled fused MoE kernels with FP8 weights: exactly the kFp8 entries of plan::kMegaKernels, each timed and traced
// (four instantiations); launch_mega_moe picks among all entries (FP4: mega_kernel_fp4.cu).
#include "kernels/mega/launch.cuh"

namespace symmoe::mega::kernel {

static_assert(plan::kNumMegaKernels == 3 && plan::kMegaKernels[0].weights == plan::GemmWeights::kFp8 &&
                  plan::kMegaKernels[1].weights == plan::GemmWeights::kFp8,
              "plan::kMegaKernels changed: update launch_mega_moe and launch_mega_moe_fp4");

void launch_mega_moe(const plan::MegaPlan& plan, const MegaParams& params, const MegaRankMaps& maps, int num_ctas,
                     cudaStream_t stream) {
  SYMMOE_CHECK(num_ctas >= 1, "mega", "num_ctas must be >= 1, got ", num_ctas);
  if (plan.weights == plan::GemmWeights::kFp4) return launch_mega_moe_fp4(plan, params, maps, num_ctas, stream);
  if (plan.block_m == plan::kMegaKernels[0].block_m)
    launch_mega_entry<0>(plan, params, maps, num_ctas, stream);
  else if (plan.block_m == plan::kMegaKernels[1].block_m)
    launch_mega_entry<1>(plan, params, maps, num_ctas, stream);
  else
    SYMMOE_FAIL("mega", "no compiled fused kernel with BLOCK_M ", plan.block_m, " and fp8 weights");
}

}  // namespace symmoe::mega::kernel
