// The swap-A/B grouped GEMM kernel (issue 5 item 3: small M, tokens on WGMMA N): BLOCK_M tokens x BLOCK_N weight
// rows per tile with the roles of the main kernel (grouped_gemm_kernel.cuh: one producer warpgroup, same TMA
// stages, scheduler and row addressing), math_swap_ab.cuh and epilogue_swap_ab.cuh for the math warpgroups. Cluster
// 1, bf16 output, no issue turns (decode is memory-bound; per weight byte the tensor cores see 32 token columns
// instead of 64 padded rows).
// NOTES: measured against the planner's 64 x 256 kernel (H200, x2 GPU 0, 2026-11-30, bench gemm --cases decode
// --alt block_m=32, round-robin): 128 experts x 1 / 8 / 16 tokens 0.999-1.000x (both stream weights at 4.16-4.28
// TB/s of ~4.8: the padded tensor work was already hidden), x 64 tokens 1.31x slower (two m-blocks read the weights
// twice). So the planner never picks it; it stays for block_m = 32 pins (tested against the golden model).
#pragma once

#include "kernels/gemm/epilogue_swap_ab.cuh"
#include "kernels/gemm/grouped_gemm_kernel.cuh"
#include "kernels/gemm/math_swap_ab.cuh"
#include "kernels/gemm/producer.cuh"
#include "kernels/gemm/scheduler.cuh"

namespace symmoe::gemm::kernel {

template <int BLOCK_M, int BLOCK_N, int kNumStages>
__global__ void __launch_bounds__(kNumThreads, 1)
    grouped_gemm_swap_ab_kernel(const __grid_constant__ GemmParams params, const __grid_constant__ CUtensorMap tmap_a,
                                const __grid_constant__ CUtensorMap tmap_sfa,
                                const __grid_constant__ CUtensorMap tmap_b) {
  using Layout = GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages>;
  extern __shared__ uint8_t smem_raw[];
  const Layout smem{smem_raw + ((1024 - (ptx::smem_addr(smem_raw) & 1023)) & 1023)};  // as grouped_gemm_kernel
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tmap_a);
    ptx::prefetch_tensormap(&tmap_sfa);
    ptx::prefetch_tensormap(&tmap_b);
    smem.init_stage_barriers(kNumMathWarpgroups * 4);
  }
  __syncthreads();

  TileScheduler<BLOCK_M, BLOCK_N, 1> sched(params, blockIdx.x, gridDim.x, 0);
  if (wg == kNumMathWarpgroups) {
    ptx::setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x == kNumMathWarpgroups * 128)
      run_producer<BLOCK_M, BLOCK_N, kNumStages, 1, false>(params, smem, &tmap_a, &tmap_sfa, &tmap_b, sched, 0);
  } else {
    ptx::setmaxnreg_inc<kMathRegisters>();
    PipelineState<kNumStages> pipe;
    float acc[SwapAbSlice<BLOCK_M>::kNumAcc];
    Tile tile;
    while (sched.next(tile)) {
      swap_ab_mainloop<BLOCK_M, BLOCK_N, kNumStages>(params, smem, tile, wg, pipe, acc);
      if (params.skip_epilogue) continue;  // timing only (GemmParams)
      epilogue_swap_ab<BLOCK_M, BLOCK_N, kNumStages, kEpilogueBarrier>(params, tile, wg, smem, acc);
    }
    if (threadIdx.x < BLOCK_M) ptx::bulk_wait_group<0>();  // the last tile's stores read their rows
  }
}

}  // namespace symmoe::gemm::kernel
