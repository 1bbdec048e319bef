// Producer role with FP4 weights (cluster 1): one thread walks the tiles and, per 128-wide K block, waits for the
// stage to be free, announces its bytes and issues the TMA loads of A, A's scales, the packed FP4 B tile
// [BLOCK_N, 64 B] and its scale codes [BLOCK_N] int32, all completing on raw_full.
// kMathConverts (BLOCK_M 64): the math warpgroups (math_fp4.cuh) convert the FP4 tile one K block ahead and release
// empty once their WGMMAs of the block completed; nothing else is published.
// Otherwise (converter warps, fp4_converter.cuh): the producer also leaves the stage's two base codes
// (load_base_codes) in its slot before the arrive, and after the last tile one more stage carries the stop mark
// (base code -1) and no bytes: the converters, who walk no scheduler of their own, leave on it. The raw stage is
// free again when the math warps release empty, which they do only after the converters' full, i.e. after the
// converters have read the FP4 tile, the codes and the slot. The math warps never wait for the stop mark.
#pragma once

#include "kernels/gemm/fp4_converter.cuh"
#include "kernels/gemm/scheduler.cuh"
#include "kernels/gemm/smem_layout.hpp"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/tma.cuh"

namespace symmoe::gemm::kernel {

// Layout: the kernel's shared-memory layout with FP4 stages (GemmSmemLayout, or SwapAbSmemLayout of the swap-AB
// core, whose math warps convert): a(s), sfa(s), b_fp4(s), codes(s), raw_full(s), empty(s) and kStageTxBytes.
template <int BLOCK_M, int BLOCK_N, int kNumStages, EpilogueKind kEpilogue, bool kMathConverts, typename Layout>
__device__ __forceinline__ void run_producer_fp4(const GemmParams& params, const Layout& smem,
                                                 const CUtensorMap* tmap_a, const CUtensorMap* tmap_sfa,
                                                 const CUtensorMap* tmap_b_fp4, const CUtensorMap* tmap_codes,
                                                 TileScheduler<BLOCK_M, BLOCK_N, 1>& sched) {
  const int num_k_blocks = params.k / 128;
  PipelineState<kNumStages> pipe;
  Tile tile;
  while (sched.next(tile)) {
    const int b_row = tile.expert_idx * params.n + tile.n_begin;
    const int codes_row0 = tile.expert_idx * num_k_blocks;
    for (int kb = 0; kb < num_k_blocks; ++kb) {
      [[maybe_unused]] int2 base;
      if constexpr (!kMathConverts) base = load_base_codes<kEpilogue, BLOCK_N>(params, tile, kb);  // during the wait
      ptx::mbarrier_wait_parity(smem.empty(pipe.stage), pipe.phase ^ 1);
      if constexpr (!kMathConverts) *smem.fp4_base_codes(pipe.stage) = base;  // released by the arrive below
      uint64_t* raw_full = smem.raw_full(pipe.stage);
      ptx::mbarrier_arrive_expect_tx(raw_full, Layout::kStageTxBytes);
      ptx::tma_load_2d(smem.a(pipe.stage), tmap_a, raw_full, kb * 128, tile.row_begin);
      ptx::tma_load_2d(smem.sfa(pipe.stage), tmap_sfa, raw_full, tile.row_begin & ~(kSfaBoxPad - 1), kb);
      const Fp4TmaCoords b = fp4_tma_coords(kb, b_row);
      ptx::tma_load_2d(smem.b_fp4(pipe.stage), tmap_b_fp4, raw_full, b.x, b.y);
      ptx::tma_load_2d(smem.codes(pipe.stage), tmap_codes, raw_full, tile.n_begin, codes_row0 + kb);
      pipe.advance();
    }
  }
  if constexpr (!kMathConverts) {
    ptx::mbarrier_wait_parity(smem.empty(pipe.stage), pipe.phase ^ 1);
    *smem.fp4_base_codes(pipe.stage) = make_int2(kFp4StopMark, kFp4StopMark);
    ptx::mbarrier_arrive(smem.raw_full(pipe.stage));
  }
}

}  // namespace symmoe::gemm::kernel
