// Host-visible entry into the fused MoE kernel: one launcher over the compiled shapes (plan::kMegaKernels).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "kernels/mega/params.hpp"
#include "plan/mega_kernels.hpp"

namespace symmoe::mega::kernel {

// Launches `num_ctas` persistent CTAs (all must be co-resident: at most the rank's SM share) of the compiled
// kernel with plan.block_m and plan.weights; throws symmoe::Error if none is compiled or the shared memory disagrees
// with the plan. maps: the six phase maps (maps.gemm, all an FP8 kernel takes) and, for FP4 weights, the codes maps.
void launch_mega_moe(const plan::MegaPlan& plan, const MegaParams& params, const MegaRankMaps& maps, int num_ctas,
                     cudaStream_t stream);

// The launch of compiled kernel plan::kMegaKernels[kIndex] (launch.cuh); each mega_kernel*.cu instantiates its own
// entries, so the kernels compile in separate translation units.
template <int kIndex>
void launch_mega_entry(const plan::MegaPlan& plan, const MegaParams& params, const MegaRankMaps& maps, int num_ctas,
                       cudaStream_t stream);

}  // namespace symmoe::mega::kernel
