// Compiled fused MoE kernels with FP4 weights on the swap-AB core (BLOCK_M 16, 32: plan::kMegaKernels entries 4 and
// 5), each timed and traced.
#include "kernels/mega/launch.cuh"

namespace symmoe::mega::kernel {

static_assert(plan::kMegaKernels[4].block_m == 16 && plan::kMegaKernels[5].block_m == 32 &&
                  plan::kMegaKernels[5].weights == plan::GemmWeights::kFp4,
              "plan::kMegaKernels changed: update the explicit instantiations of mega_kernel*.cu");
template void launch_mega_entry<4>(const plan::MegaPlan&, const MegaParams&, const MegaRankMaps&, int, cudaStream_t);
template void launch_mega_entry<5>(const plan::MegaPlan&, const MegaParams&, const MegaRankMaps&, int, cudaStream_t);

}  // namespace symmoe::mega::kernel
