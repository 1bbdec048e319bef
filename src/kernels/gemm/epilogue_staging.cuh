// Epilogue output path through shared memory: each math warp writes its 16 output rows (one 64-column bf16 or
// 128-channel e4m3 slab, <= 128 B per row) into its own staging rows, then 16 lanes issue one bulk store
// (cp.async.bulk shared -> global) per valid row. The warp goes back to the mainloop while the TMA engine drains
// the rows; it only waits (wait_group.read) before it overwrites its staging rows with the next slab.
// NOTES: why: storing from registers (16 B per quad per row, stalled on lg_throttle) kept both math warpgroups
// busy several us per tile with the tensor cores idle; staged, 1.06-1.18x faster on bf16 shapes, 1.12x on the L1
// SwiGLU shape (docs/notes/gemm.md). Rows are 144 B apart (128 + 16): the 8 rows one store instruction touches then
// fall on distinct banks. Only valid rows (and columns < n) are stored, so partial tiles and the masked layout need
// no special case. Per-warp: no named barrier, no cross-warp wait.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/gemm/smem_layout.hpp"
#include "kernels/ptx/bulk.cuh"
#include "kernels/ptx/tma.cuh"

namespace symmoe::gemm::kernel {

// 16 staging rows of one warp, kRowBytes_ apart; WarpStaging is the 64-column slab form used by the epilogues here and
// in the fused kernel, epilogue_tile_buffer.cuh uses wider rows (a whole 16 x BLOCK_N bf16 slice).
template <int kRowBytes_>
struct StagingRows {
  static constexpr int kRows = 16;
  static constexpr int kRowBytes = kRowBytes_;
  uint8_t* rows;  // this warp's kRows staging rows
  int lane;

  // Before writing new rows: the previous slab's bulk stores have read them.
  __device__ __forceinline__ void acquire() const {
    if (lane < kRows) ptx::bulk_wait_group_read<0>();
    __syncwarp();
  }
  __device__ __forceinline__ uint8_t* row(int r) const { return rows + r * kRowBytes; }
  // After writing: lane r < 16 stores staging row r to `dst` (nullptr: row not stored), `bytes` (multiple of 16).
  __device__ __forceinline__ void publish(void* dst, uint32_t bytes) const {
    ptx::fence_proxy_async_shared_cta();  // this thread's generic smem writes -> visible to the bulk copy
    __syncwarp();
    if (lane < kRows) {
      if (dst != nullptr) ptx::bulk_store_shared_to_global(dst, row(lane), bytes);
      ptx::bulk_commit_group();
    }
  }
  // Before the CTA exits: all stores complete (their shared-memory source stays valid until then).
  __device__ __forceinline__ void drain() const {
    if (lane < kRows) ptx::bulk_wait_group<0>();
    __syncwarp();
  }
};

using WarpStaging = StagingRows<plan::kGemmStagingRowBytes>;

// One 16 x 64 bf16 slab of the warp's WGMMA accumulator fragment (64-column half h, slab 0 or 1 of it) into its
// staging rows, row r at row(r) (128 B), ready for publish(): the bf16 epilogues of the grouped GEMM and of the fused
// kernel's L2 write-back share it. Fragment order: acc[64 h + 4 (8 slab + c) + 2 r + {0, 1}] is row lane / 4 + 8 r,
// columns 8 c + 2 (lane % 4) + {0, 1} of the slab.
template <int kNumAcc>
__device__ __forceinline__ void stage_bf16_slab(const WarpStaging& staging, const float (&acc)[kNumAcc], int h,
                                                int slab) {
  staging.acquire();
  const int lane = staging.lane;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    uint8_t* row = staging.row(lane / 4 + 8 * r) + 4 * (lane % 4);
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const float* v = acc + 64 * h + 4 * (8 * slab + c) + 2 * r;
      *reinterpret_cast<__nv_bfloat162*>(row + 16 * c) = __floats2bfloat162_rn(v[0], v[1]);
    }
  }
}

// The staging rows of math warp `warp` (0..3) of math warpgroup `wg`. Layout: a GemmSmemLayout without the tile
// buffer, or the fused kernel's one-batch CoreSmemLayout (plan::GemmCoreOutput::kStagingRows).
template <typename Layout>
__device__ __forceinline__ WarpStaging warp_staging(const Layout& smem, int wg, int warp, int lane) {
  static_assert(Layout::kStagingWarpBytes == WarpStaging::kRows * WarpStaging::kRowBytes,
                "the layout's staging rows are WarpStaging's");
  return WarpStaging{smem.staging(wg * 4 + warp), lane};
}

}  // namespace symmoe::gemm::kernel
