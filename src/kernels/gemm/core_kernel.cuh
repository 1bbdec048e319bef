// The one-batch SM90 FP8 grouped GEMM kernel (plan::GemmCore::kOneBatch), bf16 or SwiGLU + FP8 output: wires its roles
// (producer.cuh, core_math.cuh, core_epilogue.cuh, scheduler.cuh). 384 threads: warpgroups 0-1 math (setmaxnreg
// 232), warpgroup 2 producer (setmaxnreg 40; one thread issues TMA). Persistent: gridDim.x CTAs (a multiple of
// kClusterM) loop over the BLOCK_M x BLOCK_N tiles of all experts (BLOCK_M 128, or 64: the split-N 64 x 256 tile).
// kClusterM 2 (BLOCK_M 128): the cluster's two CTAs take neighbouring m-blocks of one n-block, each loads half of the
// weight tile and multicasts it to both (producer.cuh); an odd m-block count's last m-block they take for
// neighbouring n-blocks, each with its own weight tile (scheduler.cuh).
#pragma once

#include "kernels/gemm/core_epilogue.cuh"
#include "kernels/gemm/core_math.cuh"
#include "kernels/gemm/producer.cuh"
#include "kernels/gemm/scheduler.cuh"
#include "kernels/ptx/cluster.cuh"

namespace symmoe::gemm::kernel {

constexpr int kCoreNumThreads = 384;
constexpr int kCoreMathRegisters = 232, kCoreProducerRegisters = 40;

// tmap_d: the output's map (bf16 D, or the SwiGLU kernel's e4m3 p.out; core_epilogue.cuh).
template <int BLOCK_M, int BLOCK_N, int kNumStages, int kClusterM, EpilogueKind kEpilogue>
__global__ void __launch_bounds__(kCoreNumThreads, 1)
    grouped_gemm_core_kernel(const __grid_constant__ GemmParams params, const __grid_constant__ CUtensorMap tmap_a,
                             const __grid_constant__ CUtensorMap tmap_sfa, const __grid_constant__ CUtensorMap tmap_b,
                             const __grid_constant__ CUtensorMap tmap_d) {
  using Layout = CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, plan::gemm_core_tile_output(kEpilogue)>;
  static_assert(BLOCK_M == 128 || kClusterM == 1, "the split-N tile runs single CTAs");
  extern __shared__ uint8_t smem_raw[];
  const Layout smem{smem_raw + ((1024 - (ptx::smem_addr(smem_raw) & 1023)) & 1023)};
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);  // warp-uniform: uniform-register descriptors
  const int cta_rank = kClusterM == 1 ? 0 : int(ptx::cluster_cta_rank());

  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tmap_a);
    ptx::prefetch_tensormap(&tmap_sfa);
    ptx::prefetch_tensormap(&tmap_b);
    ptx::prefetch_tensormap(&tmap_d);
    smem.init_stage_barriers(2 * 4 * kClusterM);
  }
  ptx::cluster_or_cta_sync<kClusterM>();

  TileScheduler<BLOCK_M, BLOCK_N, kClusterM> sched(params);
  if (wg == 2) {
    ptx::setmaxnreg_dec<kCoreProducerRegisters>();
    if (threadIdx.x == 256)
      run_producer<BLOCK_M, BLOCK_N, kNumStages, kClusterM>(params, smem, &tmap_a, &tmap_sfa, &tmap_b, sched, cta_rank);
  } else {
    ptx::setmaxnreg_inc<kCoreMathRegisters>();
    PipelineState<kNumStages> pipe;
    float acc[Layout::kNumAcc];
    Tile tile;
    for (int parity = 0; sched.next(tile); parity ^= 1) {
      stage_core_b_scales<kEpilogue>(params, tile, smem, wg, parity, kCoreEpilogueBarrier + wg);
      core_k_loop<kClusterM, kEpilogue>(params, smem, tile, wg, parity, pipe, acc);
      if constexpr (kEpilogue == EpilogueKind::kSwigluFp8)
        core_epilogue_swiglu_fp8(params, tile, wg, parity, smem, acc, &tmap_d);
      else
        core_epilogue_bf16(params, tile, wg, smem, acc, &tmap_d);
    }
    if (threadIdx.x % 128 < Layout::kNumAtoms) ptx::bulk_wait_group<0>();  // the last TMA stores done with the tile
  }
  // No CTA may leave while its cluster peer can still multicast into it or arrive on its barriers.
  if constexpr (kClusterM > 1) {
    ptx::cluster_arrive_release();
    ptx::cluster_wait_acquire();
  }
}

}  // namespace symmoe::gemm::kernel
