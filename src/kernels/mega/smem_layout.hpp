// Shared memory of the fused MoE kernel: the GEMM core's regions (plan::mega_core(BLOCK_M, weights)'s layout: the
// swap-AB core's kernels/gemm/swap_ab_smem_layout.hpp at BLOCK_M 16 and 32; the one-batch core's
// kernels/gemm/core_smem_layout.hpp at 128 and (FP8) 64 with the staging rows as its output region: staging, at 64 the
// L1 amax exchange, stage ring, staged B scales, stage barriers; the two-halves core's kernels/gemm/smem_layout.hpp at
// FP4 64: stage ring, amax exchange, epilogue staging, stage barriers; base aligned to 1024 bytes inside the launch's
// slack), then the per-expert counts (layout::MegaSmemCounts). The one place that stacks the two: the launcher reads
// num_bytes, the kernel the pointers; the planner's plan::mega_smem_bytes is the same sum (checked below). kFp4 (FP4
// weights): the GEMM core's FP4 regions (two-halves core: raw stages of packed FP4 tiles + codes, the E4M3 ring, the
// upconversion tables and the base-code slots, unused here: the math warpgroups convert; swap-AB core: packed FP4
// tiles + codes per stage, the tables), the same counts after them.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/gemm/core_smem_layout.hpp"
#include "kernels/gemm/smem_layout.hpp"
#include "kernels/gemm/swap_ab_smem_layout.hpp"
#include "layout/mega_smem.hpp"
#include "plan/mega_kernels.hpp"

namespace symmoe::mega::kernel {

template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kFp4 = false>
struct MegaSmemLayout {
  static constexpr plan::GemmCore kCore =
      plan::mega_core(BLOCK_M, kFp4 ? plan::GemmWeights::kFp4 : plan::GemmWeights::kFp8);
  static_assert(kCore != plan::GemmCore::kOneBatch || (!kFp4 && BLOCK_N == 256),
                "the fused one-batch core: FP8 weights, 64 x 256 and 128 x 256 tiles");
  using Core = std::conditional_t<
      kCore == plan::GemmCore::kSwapAB, gemm::kernel::SwapAbSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kFp4>,
      std::conditional_t<
          kCore == plan::GemmCore::kOneBatch,
          gemm::kernel::CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, plan::GemmCoreOutput::kStagingRows>,
          gemm::kernel::GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, false, kFp4,
                                       plan::gemm_b_scales_in_smem(
                                           kFp4 ? plan::GemmWeights::kFp4 : plan::GemmWeights::kFp8, true)>>>;
  static_assert(Core::kBytes % 16 == 0, "the counts after the GEMM core's regions must be 16-byte aligned");

  // Dynamic shared memory of one launch (E experts, El local experts).
  __host__ __device__ static constexpr int num_bytes(int num_experts, int num_local_experts) {
    return Core::kDynamicBytes + layout::MegaSmemCounts::num_bytes(num_experts, num_local_experts);
  }

  Core core;
  layout::MegaSmemCounts counts;

  // `raw`: the kernel's dynamic shared memory (extern __shared__), any alignment.
  __device__ MegaSmemLayout(uint8_t* raw, int num_ranks, int num_local_experts)
      : core{raw + ((1024 - (ptx::smem_addr(raw) & 1023)) & 1023)},
        counts{reinterpret_cast<uint64_t>(core.base + Core::kBytes), num_ranks, num_local_experts} {}
};

// The layout of compiled fused kernel kMegaKernels[kIndex].
template <int kIndex>
using MegaSmemLayoutOf = MegaSmemLayout<plan::kMegaKernels[kIndex].block_m, plan::kMegaKernels[kIndex].block_n,
                                        plan::kMegaKernels[kIndex].num_stages,
                                        plan::kMegaKernels[kIndex].weights == plan::GemmWeights::kFp4>;

// The planner's model is this layout (every compiled kernel at one sample shape; both are sums of the same terms).
template <int kIndex>
constexpr bool smem_model_agrees() {
  constexpr plan::MegaKernelShape s = plan::kMegaKernels[kIndex];
  return MegaSmemLayoutOf<kIndex>::num_bytes(256, 32) ==
         plan::mega_smem_bytes(s.block_m, s.block_n, s.num_stages, 256, 32, s.weights);
}
template <int... kIndex>
constexpr bool smem_models_agree(std::integer_sequence<int, kIndex...>) {
  return (smem_model_agrees<kIndex>() && ...);
}
static_assert(smem_models_agree(std::make_integer_sequence<int, plan::kNumMegaKernels>{}),
              "plan::mega_smem_bytes disagrees with MegaSmemLayout");

}  // namespace symmoe::mega::kernel
