// The SM90 FP8 grouped GEMM kernel: wires the roles (producer.cuh, math.cuh, epilogue_*.cuh, scheduler.cuh).
// 384 threads: warpgroups 0-1 math (setmaxnreg 232), warpgroup 2 producer (setmaxnreg 40; one thread issues TMA).
// Persistent: gridDim.x CTAs (a multiple of kClusterM) loop over the tiles of all experts.
// NOTES: per tile, the epilogue goes through per-warp staging rows and bulk stores (epilogue_staging.cuh), so the
// math warps return to the mainloop while the TMA engine drains the rows. What is left is the mainloop: ~0.90 us per
// K block vs ~0.52 us of tensor-core work on the L2 shape; the math warps' stalls sit on the wgmma wait, the
// issue-turn barrier and the promotion chain (ncu, docs/notes/gemm.md).
#pragma once

#include "kernels/gemm/epilogue_bf16.cuh"
#include "kernels/gemm/epilogue_swiglu.cuh"
#include "kernels/gemm/epilogue_tile_buffer.cuh"
#include "kernels/gemm/math.cuh"
#include "kernels/gemm/producer.cuh"
#include "kernels/gemm/scheduler.cuh"
#include "kernels/ptx/cluster.cuh"

namespace symmoe::gemm::kernel {

constexpr int kNumMathWarpgroups = 2;
constexpr int kNumThreads = 128 * (kNumMathWarpgroups + 1);
constexpr int kMathRegisters = 232, kProducerRegisters = 40;
constexpr int kEpilogueBarrier = 1;  // named barrier id of the two math warpgroups (256 threads)

// The kernel's shared memory (the launcher reads its size): FP8 weights, the B scales where
// plan::gemm_b_scales_in_smem puts them for a standalone grouped GEMM (math.cuh).
template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kTileBuffer>
using GroupedGemmSmemLayout = GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kTileBuffer, false,
                                             plan::gemm_b_scales_in_smem(plan::GemmWeights::kFp8, false)>;

// kTileBuffer: the bf16 epilogue stages the whole slice and returns to the mainloop at once (epilogue_tile_buffer.cuh).
template <int BLOCK_M, int BLOCK_N, int kNumStages, int kClusterM, EpilogueKind kEpilogue, bool kTileBuffer>
__global__ void __launch_bounds__(kNumThreads, 1)
    grouped_gemm_kernel(const __grid_constant__ GemmParams params, const __grid_constant__ CUtensorMap tmap_a,
                        const __grid_constant__ CUtensorMap tmap_sfa, const __grid_constant__ CUtensorMap tmap_b) {
  static_assert(!kTileBuffer || kEpilogue == EpilogueKind::kBf16, "the tile buffer is a bf16 epilogue");
  using Layout = GroupedGemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kTileBuffer>;
  extern __shared__ uint8_t smem_raw[];
  // Align by offsetting the __shared__ array itself (not through an integer cast), so the compiler keeps the
  // shared address space: scale loads, amax exchange and staging stores compile to LDS/STS, not generic LD/ST.
  const Layout smem{smem_raw + ((1024 - (ptx::smem_addr(smem_raw) & 1023)) & 1023)};
  const int wg = threadIdx.x / 128;
  const int cta_rank = kClusterM == 1 ? 0 : int(ptx::cluster_cta_rank());

  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tmap_a);
    ptx::prefetch_tensormap(&tmap_sfa);
    ptx::prefetch_tensormap(&tmap_b);
    smem.init_stage_barriers(kNumMathWarpgroups * 4 * kClusterM);
  }
  ptx::cluster_or_cta_sync<kClusterM>();

  TileScheduler<BLOCK_M, BLOCK_N, kClusterM> sched(params);
  if (wg == kNumMathWarpgroups) {
    ptx::setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x == kNumMathWarpgroups * 128)
      run_producer<BLOCK_M, BLOCK_N, kNumStages, kClusterM>(params, smem, &tmap_a, &tmap_sfa, &tmap_b, sched, cta_rank);
  } else {
    ptx::setmaxnreg_inc<kMathRegisters>();
    const WarpgroupSlice<BLOCK_M, BLOCK_N> slice(wg);
    PipelineState<kNumStages> pipe;
    float acc[WarpgroupSlice<BLOCK_M, BLOCK_N>::kNumAcc];
    if (wg == 1) pass_issue_turn(1);  // warpgroup 0 issues first
    const StagingRows<Layout::kStagingRowBytes> staging{smem.staging(wg * 4 + (threadIdx.x % 128) / 32),
                                                        int(threadIdx.x % 32)};
    Tile tile;
    for (int tile_count = 0; sched.next(tile); ++tile_count) {
      math_mainloop<BLOCK_M, BLOCK_N, kNumStages, kClusterM, kEpilogue, kTileBuffer>(params, smem, tile, slice, wg,
                                                                                     pipe, acc);
      if constexpr (kEpilogue == EpilogueKind::kSwigluFp8)
        epilogue_swiglu_fp8<kEpilogueBarrier>(params, tile, wg, tile_count & 1, smem, slice, acc, staging);
      else if constexpr (kTileBuffer)
        epilogue_bf16_tile_buffer(params, tile, slice, acc, staging);
      else
        epilogue_bf16(params, tile, slice, acc, staging);
    }
    staging.drain();
    if (wg == 0) wait_issue_turn(0);  // consume warpgroup 1's last hand-over
  }
  // No CTA may leave while its cluster peer can still multicast into it or arrive on its barriers.
  if constexpr (kClusterM > 1) {
    ptx::cluster_arrive_release();
    ptx::cluster_wait_acquire();
  }
}

}  // namespace symmoe::gemm::kernel
