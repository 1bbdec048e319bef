// The SM90 grouped GEMM with FP4 E2M1 weights: the FP8 kernel's roles (grouped_gemm_kernel.cuh) with the weight
// tile travelling as packed FP4 (half the bytes) and upconverted to E4M3 in shared memory before the WGMMA.
// 384 threads: warpgroups 0-1 math (setmaxnreg 232), warpgroup 2 (setmaxnreg 40): warp 0 lane 0 the TMA producer
// (producer_fp4.cuh). The launch holds 168 x 384 = 64512 registers; the math warpgroups' increase must fit what the
// producer warpgroup gives back, or setmaxnreg.inc never returns. Cluster 1, persistent.
// Who upconverts (kMathConverts):
//   BLOCK_M 64 (decode sizes): the math warpgroups, each its own 128 B rows one K block ahead while its WGMMAs of the
//     current block run (math_fp4.cuh states the protocol: raw_full (TMA) -> named barrier per warpgroup -> empty).
//   BLOCK_M 128: warps 1-3 of warpgroup 2 (fp4_converter.cuh: raw_full -> full (E4M3 ring) -> empty, conv_empty).
//     NOTES: the math warps' conversion does not fit next to the 128 x 256 slice's 128 accumulators and 64-register
//     partial in 232 registers (ptxas spills; docs/notes/gemm.md lists the placements tried).
#pragma once

#include "kernels/gemm/epilogue_bf16.cuh"
#include "kernels/gemm/epilogue_swiglu.cuh"
#include "kernels/gemm/fp4_converter.cuh"
#include "kernels/gemm/grouped_gemm_kernel.cuh"
#include "kernels/gemm/math.cuh"
#include "kernels/gemm/math_fp4.cuh"
#include "kernels/gemm/producer_fp4.cuh"
#include "kernels/gemm/scheduler.cuh"

namespace symmoe::gemm::kernel {

static_assert(128 * (kProducerRegisters + kNumMathWarpgroups * kMathRegisters) <= kNumThreads * 168,
              "setmaxnreg: the math warpgroups' increase must fit what the producer warpgroup releases");

// The kernel's shared memory (the launcher reads its size): FP4 weights, the B scales where
// plan::gemm_b_scales_in_smem puts them (global memory: the converters and math_fp4.cuh read them per K block).
template <int BLOCK_M, int BLOCK_N, int kNumStages>
using GroupedGemmFp4SmemLayout = GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, false, true,
                                                plan::gemm_b_scales_in_smem(plan::GemmWeights::kFp4, false)>;

template <int BLOCK_M, int BLOCK_N, int kNumStages, EpilogueKind kEpilogue>
__global__ void __launch_bounds__(kNumThreads, 1)
    grouped_gemm_fp4_kernel(const __grid_constant__ GemmParams params, const __grid_constant__ CUtensorMap tmap_a,
                            const __grid_constant__ CUtensorMap tmap_sfa,
                            const __grid_constant__ CUtensorMap tmap_b_fp4,
                            const __grid_constant__ CUtensorMap tmap_codes) {
  using Layout = GroupedGemmFp4SmemLayout<BLOCK_M, BLOCK_N, kNumStages>;
  constexpr bool kMathConverts = BLOCK_M == 64;
  extern __shared__ uint8_t smem_raw[];
  const Layout smem{smem_raw + ((1024 - (ptx::smem_addr(smem_raw) & 1023)) & 1023)};  // as grouped_gemm_kernel
  const int wg = threadIdx.x / 128, lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(&tmap_a);
    ptx::prefetch_tensormap(&tmap_sfa);
    ptx::prefetch_tensormap(&tmap_b_fp4);
    ptx::prefetch_tensormap(&tmap_codes);
    smem.init_stage_barriers(kNumMathWarpgroups * 4, kMathConverts ? 0 : kNumConverterWarps);
  }
  if (threadIdx.x >= 32 && threadIdx.x < 32 + kFp4NumShifts) {
    const int i = threadIdx.x - 32;
    smem.fp4_tables()[i] = fp4_shift_table(i + fmt::kFoldExactMinShift);
  }
  __syncthreads();

  TileScheduler<BLOCK_M, BLOCK_N, 1> sched(params);
  if (wg == kNumMathWarpgroups) {
    ptx::setmaxnreg_dec<kProducerRegisters>();
    const int warp = (threadIdx.x / 32) % 4;
    if (warp == 0) {
      if (lane == 0)
        run_producer_fp4<BLOCK_M, BLOCK_N, kNumStages, kEpilogue, kMathConverts>(params, smem, &tmap_a, &tmap_sfa,
                                                                                 &tmap_b_fp4, &tmap_codes, sched);
    } else if constexpr (!kMathConverts) {
      run_converter<BLOCK_M, BLOCK_N, kNumStages, kEpilogue>(smem, warp - 1, lane);
    }
  } else {
    ptx::setmaxnreg_inc<kMathRegisters>();
    const WarpgroupSlice<BLOCK_M, BLOCK_N> slice(wg);
    PipelineState<kNumStages> pipe;
    [[maybe_unused]] Fp4ConvState conv;
    float acc[WarpgroupSlice<BLOCK_M, BLOCK_N>::kNumAcc];
    if (wg == 1) pass_issue_turn(1);  // warpgroup 0 issues first
    const WarpStaging staging{smem.staging(wg * 4 + (threadIdx.x % 128) / 32), lane};
    Tile tile;
    for (int tile_count = 0; sched.next(tile); ++tile_count) {
      if constexpr (kMathConverts)
        math_mainloop_fp4<BLOCK_M, BLOCK_N, kNumStages, kEpilogue>(params, smem, tile, slice, wg, pipe, conv, acc);
      else
        math_mainloop<BLOCK_M, BLOCK_N, kNumStages, 1, kEpilogue, false, true>(params, smem, tile, slice, wg, pipe,
                                                                               acc);
      if constexpr (kEpilogue == EpilogueKind::kSwigluFp8)
        epilogue_swiglu_fp8<kEpilogueBarrier>(params, tile, wg, tile_count & 1, smem, slice, acc, staging);
      else
        epilogue_bf16(params, tile, slice, acc, staging);
    }
    staging.drain();
    if (wg == 0) wait_issue_turn(0);  // consume warpgroup 1's last hand-over
  }
}

}  // namespace symmoe::gemm::kernel
