// Producer role: one thread of the producer warpgroup walks the tiles and, per 128-wide K block, waits for the
// stage to be free, announces its bytes and issues the TMA loads of A, A's scales and B.
// With clusters, on a tile whose B tile the cluster shares (Tile::shares_b: the same n-block of the same expert) each
// CTA loads 1 / kClusterM of it and multicasts it to all, dividing B's L2 traffic by kClusterM; otherwise each loads
// its whole B tile itself (kClusterM boxes).
#pragma once

#include "kernels/gemm/scheduler.cuh"
#include "kernels/gemm/smem_layout.hpp"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/tma.cuh"

namespace symmoe::gemm::kernel {

// Layout: the kernel's shared-memory layout with FP8 stages (GemmSmemLayout, or CoreSmemLayout of the one-batch
// core): a(s), sfa(s), b(s), full(s), empty(s) and kStageTxBytes.
template <int BLOCK_M, int BLOCK_N, int kNumStages, int kClusterM, typename Layout>
__device__ __forceinline__ void run_producer(const GemmParams& params, const Layout& smem, const CUtensorMap* tmap_a,
                                             const CUtensorMap* tmap_sfa, const CUtensorMap* tmap_b,
                                             TileScheduler<BLOCK_M, BLOCK_N, kClusterM>& sched, int cta_rank) {
  constexpr int kBRowsPerCta = BLOCK_N / kClusterM;
  const int num_k_blocks = params.k / 128;
  PipelineState<kNumStages> pipe;
  Tile tile;
  while (sched.next(tile)) {
    const int b_row = tile.expert_idx * params.n + tile.n_begin;
    for (int kb = 0; kb < num_k_blocks; ++kb) {
      ptx::mbarrier_wait_parity(smem.empty(pipe.stage), pipe.phase ^ 1);
      uint64_t* full = smem.full(pipe.stage);
      ptx::mbarrier_arrive_expect_tx(full, Layout::kStageTxBytes);
      ptx::tma_load_2d(smem.a(pipe.stage), tmap_a, full, kb * 128, tile.row_begin);
      ptx::tma_load_2d(smem.sfa(pipe.stage), tmap_sfa, full, tile.row_begin & ~(kSfaBoxPad - 1), kb);
      if (kClusterM > 1 && tile.shares_b) {
        ptx::tma_load_2d_multicast(smem.b(pipe.stage) + cta_rank * kBRowsPerCta * 128, tmap_b, full, kb * 128,
                                   b_row + cta_rank * kBRowsPerCta, uint16_t((1u << kClusterM) - 1));
      } else {
#pragma unroll
        for (int part = 0; part < kClusterM; ++part)
          ptx::tma_load_2d(smem.b(pipe.stage) + part * kBRowsPerCta * 128, tmap_b, full, kb * 128,
                           b_row + part * kBRowsPerCta);
      }
      pipe.advance();
    }
  }
}

}  // namespace symmoe::gemm::kernel
