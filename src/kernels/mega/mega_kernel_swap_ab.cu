// Compiled fused MoE kernels with FP8 weights on the swap-AB core (BLOCK_M 16, 32: plan::kMegaKernels entries 0 and
// 1), each timed and traced.
#include "kernels/mega/launch.cuh"

namespace symmoe::mega::kernel {

static_assert(plan::kMegaKernels[0].block_m == 16 && plan::kMegaKernels[1].block_m == 32 &&
                  plan::kMegaKernels[1].weights == plan::GemmWeights::kFp8,
              "plan::kMegaKernels changed: update the explicit instantiations of mega_kernel*.cu");
template void launch_mega_entry<0>(const plan::MegaPlan&, const MegaParams&, const MegaRankMaps&, int, cudaStream_t);
template void launch_mega_entry<1>(const plan::MegaPlan&, const MegaParams&, const MegaRankMaps&, int, cudaStream_t);

}  // namespace symmoe::mega::kernel
