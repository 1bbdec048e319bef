// Host-visible entry into the fused MoE kernel: one launcher over the compiled shapes (plan::kMegaKernels).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "kernels/mega/params.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::mega::kernel {

// Launches `num_ctas` persistent CTAs (all must be co-resident: at most the rank's SM share) of the compiled
// kernel with plan.block_m; throws symmoe::Error if none is compiled or the shared memory disagrees with the plan.
void launch_mega_moe(const plan::MegaPlan& plan, const MegaParams& params, const MegaTensorMaps& maps, int num_ctas,
                     cudaStream_t stream);

}  // namespace symmoe::mega::kernel
