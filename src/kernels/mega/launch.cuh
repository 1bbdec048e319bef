// The launch of one compiled fused kernel (plan::kMegaKernels[kIndex]); each mega_kernel*.cu instantiates its own
// entries (launch.hpp), so each translation unit compiles its kernels only.
#pragma once

#include "kernels/mega/launch.hpp"
#include "kernels/mega/mega_kernel.cuh"
#include "symmoe/cuda_check.hpp"

namespace symmoe::mega::kernel {

template <int kIndex>
void launch_mega_entry(const plan::MegaPlan& plan, const MegaParams& params, const MegaRankMaps& m, int num_ctas,
                       cudaStream_t stream) {
  constexpr plan::MegaKernelShape s = plan::kMegaKernels[kIndex];
  constexpr bool kFp4 = s.weights == plan::GemmWeights::kFp4;
  const int smem_bytes = MegaSmemLayoutOf<kIndex>::num_bytes(plan.shape.num_experts, plan.shape.num_local_experts());
  SYMMOE_CHECK(smem_bytes == plan.smem_bytes && s.num_stages == plan.num_stages && s.weights == plan.weights, "mega",
               "kernel ", s.block_m, "x", s.block_n, " (", plan::gemm_weights_name(s.weights), " weights) needs ",
               smem_bytes, " B of shared memory with ", s.num_stages, " stages, the plan says ", plan.smem_bytes,
               " B with ", plan.num_stages, " (", plan::gemm_weights_name(plan.weights), ")");
  // The traced instantiation only for traced calls (trace.cuh).
  auto* kernel = params.trace ? mega_moe_kernel<s.block_m, s.block_n, s.num_stages, true, kFp4>
                              : mega_moe_kernel<s.block_m, s.block_n, s.num_stages, false, kFp4>;
  static_assert(s.block_n == 256, "the fused kernels' tiles are 256 weight rows");
  SYMMOE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  if constexpr (kFp4)
    kernel<<<num_ctas, kNumThreads, smem_bytes, stream>>>(params, m);
  else
    kernel<<<num_ctas, kNumThreads, smem_bytes, stream>>>(params, m.gemm);
  SYMMOE_CUDA_CHECK_LAUNCH(kFp4 ? "mega_moe_kernel (fp4 weights)" : "mega_moe_kernel (fp8 weights)");
}

}  // namespace symmoe::mega::kernel
