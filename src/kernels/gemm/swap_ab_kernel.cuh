// The swap-AB SM90 grouped GEMM kernel (plan::GemmCore::kSwapAB), bf16 (BLOCK_N 128) or SwiGLU + FP8 (BLOCK_N 256)
// output: wires its roles (producer.cuh / producer_fp4.cuh, swap_ab_math.cuh, swap_ab_epilogue.cuh, scheduler.cuh).
// 384 threads: warpgroups 0-1 math (setmaxnreg 232), warpgroup 2 producer (setmaxnreg 40; one thread issues TMA).
// Persistent: gridDim.x CTAs loop over the tiles of BLOCK_M tokens x BLOCK_N weight rows of all experts (the
// scheduler's m-blocks are token blocks, its n-blocks the weight tiles). The math warpgroups work independently: each
// waits for the stage, runs its own BLOCK_N / 2 weight rows and releases the stage (one arrive per warp), then stores
// its part of the tile; the SwiGLU epilogue joins them once per tile for the per-token amax.
#pragma once

#include "kernels/gemm/producer.cuh"
#include "kernels/gemm/producer_fp4.cuh"
#include "kernels/gemm/scheduler.cuh"
#include "kernels/gemm/swap_ab_epilogue.cuh"
#include "kernels/gemm/swap_ab_math.cuh"

namespace symmoe::gemm::kernel {

constexpr int kSwapAbNumThreads = 384;
constexpr int kSwapAbMathRegisters = 232, kSwapAbProducerRegisters = 40;

// tmap_codes: FP4 only (the weight tile's scale codes); FP8 ignores it.
template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kFp4, EpilogueKind kEpilogue>
__global__ void __launch_bounds__(kSwapAbNumThreads, 1)
    grouped_gemm_swap_ab_kernel(const __grid_constant__ GemmParams params, const __grid_constant__ CUtensorMap tmap_a,
                                const __grid_constant__ CUtensorMap tmap_sfa,
                                const __grid_constant__ CUtensorMap tmap_b,
                                const __grid_constant__ CUtensorMap tmap_codes) {
  using Layout = SwapAbSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kFp4>;
  extern __shared__ uint8_t smem_raw[];
  const Layout smem{smem_raw + ((1024 - (ptx::smem_addr(smem_raw) & 1023)) & 1023)};
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);  // warp-uniform

  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tmap_a);
    ptx::prefetch_tensormap(&tmap_sfa);
    ptx::prefetch_tensormap(&tmap_b);
    if constexpr (kFp4) ptx::prefetch_tensormap(&tmap_codes);
    smem.init_stage_barriers(2 * 4);
  }
  if constexpr (kFp4) {
    if (threadIdx.x >= 32 && threadIdx.x < 32 + kFp4NumShifts) {
      const int i = threadIdx.x - 32;
      smem.fp4_tables()[i] = fp4_shift_table(i + fmt::kFoldExactMinShift);
    }
  }
  __syncthreads();

  TileScheduler<BLOCK_M, BLOCK_N, 1> sched(params);
  if (wg == 2) {
    ptx::setmaxnreg_dec<kSwapAbProducerRegisters>();
    if (threadIdx.x == 256) {
      if constexpr (kFp4)
        run_producer_fp4<BLOCK_M, BLOCK_N, kNumStages, kEpilogue, true>(params, smem, &tmap_a, &tmap_sfa, &tmap_b,
                                                                        &tmap_codes, sched);
      else
        run_producer<BLOCK_M, BLOCK_N, kNumStages, 1>(params, smem, &tmap_a, &tmap_sfa, &tmap_b, sched, 0);
    }
  } else {
    ptx::setmaxnreg_inc<kSwapAbMathRegisters>();
    PipelineState<kNumStages> pipe;
    float acc[BLOCK_N / 128 * BLOCK_M / 2];
    Tile tile;
    for (int tile_count = 0; sched.next(tile); ++tile_count) {
      swap_ab_k_loop<BLOCK_M, BLOCK_N, kNumStages, kFp4, kEpilogue>(params, smem, tile, wg, pipe, acc);
      if constexpr (kEpilogue == EpilogueKind::kSwigluFp8)
        swap_ab_epilogue_swiglu_fp8(params, tile, wg, tile_count & 1, smem, acc);
      else
        swap_ab_epilogue_bf16<BLOCK_M, BLOCK_N>(params, tile, wg, acc);
    }
  }
}

}  // namespace symmoe::gemm::kernel
