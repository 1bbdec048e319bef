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

// The TMA descriptors of one launch (src/gemm/tensor_map): A, its scales, B (e4m3 [E n, k], 128B-swizzled boxes of
// 128 x block_n; FP4: packed [E n, k/2], unswizzled boxes of 64 B x block_n) and, FP4 only, B's scale codes
// (int32 [E k/128, n], boxes of block_n x 1).
// The one-batch core (plan::GemmCore::kOneBatch) also stores D through a map: bf16 [rows, n], 128B-swizzled boxes of
// 64 columns x 128 rows.
struct GemmTensorMaps {
  CUtensorMap a, sfa, b, b_codes, d;
};

// Launches `num_ctas` persistent CTAs (a multiple of the cluster size) of the compiled kernel `shape`; throws
// symmoe::Error if it is not one of plan::kGemmKernels.
void launch_grouped_gemm(const plan::GemmKernelShape& shape, const GemmParams& params, const GemmTensorMaps& maps,
                         int num_ctas, cudaStream_t stream);

// This file's share of plan::kGemmKernels (grouped_gemm_bf16.cu, grouped_gemm_bf16_wide.cu, grouped_gemm_swiglu.cu,
// grouped_gemm_fp4.cu, grouped_gemm_core.cu): launches entry `index` and returns true if the file compiled it.
bool launch_bf16_narrow(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas,
                        cudaStream_t stream);
bool launch_bf16_wide(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas,
                      cudaStream_t stream);
bool launch_swiglu(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream);
bool launch_fp4(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream);
bool launch_core(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream);

}  // namespace symmoe::gemm::kernel
