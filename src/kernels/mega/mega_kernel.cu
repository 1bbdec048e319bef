// Compiled fused MoE kernels: exactly the entries of plan::kMegaKernels, each timed and traced (four instantiations).
#include "kernels/mega/launch.hpp"
#include "kernels/mega/mega_kernel.cuh"
#include "symmoe/cuda_check.hpp"

namespace symmoe::mega::kernel {

namespace {

template <int kIndex>
void launch_entry(const plan::MegaPlan& plan, const MegaParams& params, const MegaTensorMaps& m, int num_ctas,
                  cudaStream_t stream) {
  constexpr plan::MegaKernelShape s = plan::kMegaKernels[kIndex];
  using Layout = MegaSmemLayout<s.block_m, s.block_n, s.num_stages>;
  const int smem_bytes = Layout::num_bytes(plan.shape.num_experts, plan.shape.num_local_experts());
  SYMMOE_CHECK(smem_bytes == plan.smem_bytes && s.num_stages == plan.num_stages, "mega", "kernel ", s.block_m, "x",
               s.block_n, " needs ", smem_bytes, " B of shared memory with ", s.num_stages, " stages, the plan says ",
               plan.smem_bytes, " B with ", plan.num_stages);
  // The traced instantiation only for traced calls (trace.cuh).
  auto* kernel = params.trace ? mega_moe_kernel<s.block_m, s.block_n, s.num_stages, true>
                              : mega_moe_kernel<s.block_m, s.block_n, s.num_stages, false>;
  SYMMOE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  kernel<<<num_ctas, kNumThreads, smem_bytes, stream>>>(params, m);
  SYMMOE_CUDA_CHECK_LAUNCH("mega_moe_kernel");
}

}  // namespace

static_assert(plan::kNumMegaKernels == 2, "plan::kMegaKernels changed: update launch_mega_moe");

void launch_mega_moe(const plan::MegaPlan& plan, const MegaParams& params, const MegaTensorMaps& maps, int num_ctas,
                     cudaStream_t stream) {
  SYMMOE_CHECK(num_ctas >= 1, "mega", "num_ctas must be >= 1, got ", num_ctas);
  if (plan.block_m == plan::kMegaKernels[0].block_m)
    launch_entry<0>(plan, params, maps, num_ctas, stream);
  else if (plan.block_m == plan::kMegaKernels[1].block_m)
    launch_entry<1>(plan, params, maps, num_ctas, stream);
  else
    SYMMOE_FAIL("mega", "no compiled fused kernel with BLOCK_M ", plan.block_m);
}

}  // namespace symmoe::mega::kernel
