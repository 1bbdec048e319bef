// TMA producer of the fused kernel with FP4 weights: producer.cuh's loop (run_mega_producer_loop: the first
// kEarlyWeightStages stages get their weights before the wait for the tile's rows, their rows after it) on the GEMM
// core's FP4 stages (kernels/gemm/producer_fp4.cuh). Per stage: wait empty, one arrive_expect_tx on raw_full for
// all of the stage's bytes, TMA of the packed FP4 weight tile [256, 64 B] and its code words [256] int32, then of A
// and A's scales (now, or after the row wait for the early stages).
// That is all: the math warpgroups convert (math_fp4.cuh) and take the base codes from the B scales they load anyway.
// NOTES: registers (MegaRoles::kDataRegisters, 56). The early loop + main loop is kept: one loop with the row wait
// at kb == num_early spilled more.
#pragma once

#include "kernels/gemm/fp4_word_layout.hpp"
#include "kernels/mega/producer.cuh"

namespace symmoe::mega::kernel {

// FP4 weights: per stage one raw_full barrier for A, its scales, the packed FP4 weight tile [256, 64 B] and its code
// words [256] int32. codes_maps: the W1 codes map, the W2 codes map right after it (MegaRankMaps). Layout: the GEMM
// core's shared memory (MegaSmemLayout::Core, either core; the swap-AB core's raw_full is its full barrier).
template <typename Layout, int kNumStages>
struct Fp4ProducerStages {
  using Pipe = gemm::kernel::PipelineState<kNumStages>;
  static constexpr bool kWeightsFirst = true;
  const Layout& smem;
  const CUtensorMap* codes_maps;

  __device__ __forceinline__ uint64_t* begin(const Pipe& pipe) const {
    ptx::mbarrier_wait_parity(smem.empty(pipe.stage), pipe.phase ^ 1);
    uint64_t* raw_full = smem.raw_full(pipe.stage);
    ptx::mbarrier_arrive_expect_tx(raw_full, Layout::kStageTxBytes);  // A, its scales, FP4 B and codes
    return raw_full;
  }
  __device__ __forceinline__ uint64_t* full(int stage) const { return smem.raw_full(stage); }
  __device__ __forceinline__ void weights(const Pipe& pipe, uint64_t* raw_full, const MegaTile& t,
                                          const CUtensorMap* b_map, int kb, int b_row, int num_k_blocks) const {
    const gemm::kernel::Fp4TmaCoords b = gemm::kernel::fp4_tma_coords(kb, b_row);
    ptx::tma_load_2d(smem.b_fp4(pipe.stage), b_map, raw_full, b.x, b.y);
    ptx::tma_load_2d(smem.codes(pipe.stage), codes_maps + (t.l2 ? 1 : 0), raw_full, t.tile.n_begin,
                     t.tile.expert_idx * num_k_blocks + kb);
  }
};

template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kTrace, typename Layout>
__device__ __forceinline__ void run_mega_producer_fp4(const MegaParams& p, const Layout& smem,
                                                      const MegaTensorMaps& maps, const CUtensorMap* codes_maps,
                                                      MegaScheduler<BLOCK_M, BLOCK_N>& sched) {
  run_mega_producer_loop<BLOCK_M, BLOCK_N, kNumStages, kTrace>(p, smem, maps, sched,
                                                               Fp4ProducerStages<Layout, kNumStages>{smem, codes_maps});
}

}  // namespace symmoe::mega::kernel
