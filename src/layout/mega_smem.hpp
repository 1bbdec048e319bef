// Shared memory of the fused MoE kernel after the GEMM core's regions (src/kernels/mega/smem_layout.hpp stacks the
// two): the per-local-expert counts of one call, written by load_expert_counts after rank barrier #1 and read by
// the scheduler (both copies: producer and math) and the dispatch warps. One description for the planner
// (plan::mega_smem_bytes in src/plan/mega_kernels.hpp, via num_bytes) and the kernel (the pointers). R ranks, El local
// experts, int32 words:
//   chunk_start  [El][R]        first pool row of the pairs source s sent to local expert e (index e * R + s);
//                               nondecreasing over the index, so a pool row's (expert, source) is a binary search
//   seg_start    [El + 1]       first pool row of expert e's segment (a multiple of BLOCK_M); [El] = rows used
//   num_rows     [El]           valid rows of expert e
//   wave_last    [ceil(El/32)]  bit e % 32 of word e / 32: expert e is the last of its wave
// NOTES: seg_start, num_rows and wave_last are consecutive, so the scheduler reaches all three from one pointer
// (seg_start; num_rows_from_seg_start / wave_last_from_seg_start) and keeps one register for them.
// Plain integer math, no CUDA headers: g++ compiles this too. Internal (src/): not installed.
#pragma once

#include <cstdint>

#include "symmoe/layout/common.hpp"

namespace symmoe::layout {

struct MegaSmemCounts {
  uint64_t base = 0;  // 16-byte aligned; 0 on the host (sizes only)
  int num_ranks = 0, num_local_experts = 0;

  // Word offsets from seg_start of the two arrays that follow it.
  SYMMOE_HD static constexpr int num_rows_from_seg_start(int num_local_experts) { return num_local_experts + 1; }
  SYMMOE_HD static constexpr int wave_last_from_seg_start(int num_local_experts) { return 2 * num_local_experts + 1; }
  SYMMOE_HD static constexpr int num_wave_words(int num_local_experts) { return (num_local_experts + 31) / 32; }
  // Bytes for R x El = num_experts counts, rounded up to 16.
  SYMMOE_HD static constexpr int num_bytes(int num_experts, int num_local_experts) {
    return align_up<int>(
        (num_experts + wave_last_from_seg_start(num_local_experts) + num_wave_words(num_local_experts)) * 4, 16);
  }
  SYMMOE_HD constexpr int num_bytes() const { return num_bytes(num_ranks * num_local_experts, num_local_experts); }

  SYMMOE_HD int32_t* chunk_start() const { return at_offset<int32_t>(base, 0); }
  SYMMOE_HD int32_t* seg_start() const { return chunk_start() + num_ranks * num_local_experts; }
  SYMMOE_HD int32_t* num_rows() const { return seg_start() + num_rows_from_seg_start(num_local_experts); }
  SYMMOE_HD uint32_t* wave_last() const {
    return reinterpret_cast<uint32_t*>(seg_start() + wave_last_from_seg_start(num_local_experts));
  }
};

}  // namespace symmoe::layout
