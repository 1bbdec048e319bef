// Host-visible entry into the grouped GEMM kernels: one launcher over the compiled kernels.
// NOTES: the compiled set is plan::kGemmKernels (include/symmoe/plan.hpp), a bounded set of instantiations
// (STYLE.md 13); the host planner picks one of them, never a new one.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/gemm/params.hpp"

namespace symmoe::gemm::kernel {

std::string kernel_name(const plan::GemmKernelShape& shape);

// Launches `num_ctas` persistent CTAs (a multiple of the cluster size) of the compiled kernel `shape`; throws
// symmoe::Error if it is not one of plan::kGemmKernels. Tensor maps as built by src/gemm/tensor_map.
void launch_grouped_gemm(const plan::GemmKernelShape& shape, const GemmParams& params, const CUtensorMap& tmap_a,
                         const CUtensorMap& tmap_sfa, const CUtensorMap& tmap_b, int num_ctas, cudaStream_t stream);

// This file's share of plan::kGemmKernels (grouped_gemm_bf16.cu, grouped_gemm_bf16_wide.cu,
// grouped_gemm_swiglu.cu): launches entry `index` and returns true if the file compiled it.
bool launch_bf16_narrow(int index, const GemmParams& params, const CUtensorMap& tmap_a, const CUtensorMap& tmap_sfa,
                        const CUtensorMap& tmap_b, int num_ctas, cudaStream_t stream);
bool launch_bf16_wide(int index, const GemmParams& params, const CUtensorMap& tmap_a, const CUtensorMap& tmap_sfa,
                      const CUtensorMap& tmap_b, int num_ctas, cudaStream_t stream);
bool launch_swiglu(int index, const GemmParams& params, const CUtensorMap& tmap_a, const CUtensorMap& tmap_sfa,
                   const CUtensorMap& tmap_b, int num_ctas, cudaStream_t stream);

}  // namespace symmoe::gemm::kernel
