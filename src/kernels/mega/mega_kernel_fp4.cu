// Compiled fused MoE kernel with FP4 weights on the two-halves core (BLOCK_M 64: plan::kMegaKernels entry 6), timed
// and traced.
#include "kernels/mega/launch.cuh"

namespace symmoe::mega::kernel {

static_assert(plan::kMegaKernels[6].block_m == 64 && plan::kMegaKernels[6].weights == plan::GemmWeights::kFp4,
              "plan::kMegaKernels changed: update the explicit instantiations of mega_kernel*.cu");
template void launch_mega_entry<6>(const plan::MegaPlan&, const MegaParams&, const MegaRankMaps&, int, cudaStream_t);

}  // namespace symmoe::mega::kernel
