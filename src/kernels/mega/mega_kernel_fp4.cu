// Compiled fused MoE kernel with FP4 weights: exactly the kFp4 entry of plan::kMegaKernels (BLOCK_M 64), timed and
// traced (two instantiations of mega_moe_kernel with kFp4).
#include "kernels/mega/launch.cuh"

namespace symmoe::mega::kernel {

static_assert(plan::kNumMegaKernels == 3 && plan::kMegaKernels[2].weights == plan::GemmWeights::kFp4,
              "plan::kMegaKernels changed: update launch_mega_moe_fp4");

void launch_mega_moe_fp4(const plan::MegaPlan& plan, const MegaParams& params, const MegaRankMaps& maps, int num_ctas,
                         cudaStream_t stream) {
  if (plan.block_m == plan::kMegaKernels[2].block_m)
    launch_mega_entry<2>(plan, params, maps, num_ctas, stream);
  else
    SYMMOE_FAIL("mega", "no compiled fused kernel with BLOCK_M ", plan.block_m, " and fp4 weights");
}

}  // namespace symmoe::mega::kernel
