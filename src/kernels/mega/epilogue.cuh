// Epilogues of the fused kernel, run by the math warpgroups after the GEMM core's mainloop:
//   L1: the GEMM core's SwiGLU epilogue (epilogue_swiglu.cuh; swap-AB: swap_ab_epilogue.cuh, from the registers:
//       SwiGLU + top-k weight + FP8/UE8M0 per 128 channels) into the L2 pool; PendingL1Signal then sets the tile's bit
//       in the pool block's l2_arrival_mask.
//   L2: epilogue_l2_writeback: bf16 rows (as epilogue_bf16.cuh's staged path) stored by bulk copies straight into
//       the SOURCE rank's combine[token][lane] row (SymBuffer::map), the source read from l1_pool_src;
//       swap_ab_epilogue_l2_writeback: the same rows as 4-byte bf16 pairs from the swap-AB core's registers.
// NOTES: the signal drains the warps' bulk stores before its release (the L2 producer of any SM may read the rows
// right after); with FP4 weights on the tokens-on-M core it waits for the end of the next tile's mainloop
// (PendingL1Signal), when the stores are long complete (MegaRoles::defers_l1_signal says when, and why).
#pragma once

#include <cuda_bf16.h>

#include "kernels/gemm/epilogue_staging.cuh"
#include "kernels/gemm/math.cuh"
#include "kernels/gemm/swap_ab_epilogue.cuh"
#include "kernels/gemm/swap_ab_math.cuh"
#include "kernels/mega/params.hpp"
#include "kernels/mega/scheduler.cuh"
#include "kernels/ptx/sync.cuh"
#include "kernels/ptx/wgmma.cuh"
#include "layout/mega_roles.hpp"

namespace symmoe::mega::kernel {

// Bit of L1 n-block `n_begin / BLOCK_N` in a pool block's l2_arrival_mask, and the mask with every L1 n-block of
// the 2I L1 output columns (the L2 producer waits for it). One 64-bit word: 2I / BLOCK_N <= 64.
template <int L1_BLOCK_N>
__device__ __forceinline__ uint64_t l2_mask_bit(int n_begin) {
  static_assert(2 * layout::kMegaMaxIntermediate / L1_BLOCK_N <= 64,
                "the L2 arrival mask has one bit per L1 n-block in 64 bits");
  return 1ull << (n_begin / L1_BLOCK_N);
}
template <int L1_BLOCK_N>
__device__ __forceinline__ uint64_t l2_full_mask(int intermediate) {
  const int bits = 2 * intermediate / L1_BLOCK_N;
  return bits >= 64 ? ~0ull : (1ull << bits) - 1;
}

// The swap-AB epilogues' stores are plain st.global from the registers: no bulk store to drain before a signal.
struct DirectStores {
  __device__ __forceinline__ void drain() const {}
};

// All math threads: the L1 tile whose rows the math warpgroups have stored (epilogue_swiglu_fp8) is signalled, i.e.
// its bit set in the pool block's l2_arrival_mask after its stores are complete, at once or (kDeferred,
// MegaRoles::defers_l1_signal) at the next flush. Deadlock freedom: the kernel flushes before the mainloop of an L2
// tile (whose inputs may include the pending tile), after the mainloop of an L1 tile (whose inputs are pulled rows,
// which never wait on a signal), and after the last tile.
template <int BLOCK_N, bool kDeferred>
struct PendingL1Signal {
  int packed = -1;  // kDeferred: pool block x 64 + L1 n-block (l2_mask_bit: < 64 n-blocks); -1: nothing pending

  template <typename Staging>
  __device__ __forceinline__ void stored(const MegaParams& p, const MegaTile& t, const Staging& staging) {
    if constexpr (kDeferred)
      packed = t.pool_block * 64 + t.tile.n_begin / BLOCK_N;
    else
      signal(p, t.pool_block, t.tile.n_begin, staging);
  }

  template <typename Staging>
  __device__ __forceinline__ void flush(const MegaParams& p, const Staging& staging) {
    if constexpr (kDeferred) {
      if (packed < 0) return;  // uniform over the math threads
      signal(p, packed / 64, packed % 64 * BLOCK_N, staging);
      packed = -1;
    }
  }

 private:
  template <typename Staging>
  static __device__ __forceinline__ void signal(const MegaParams& p, int pool_block, int n_begin,
                                                const Staging& staging) {
    staging.drain();                  // this warp's bulk stores have written the rows (DirectStores: none)
    ptx::fence_proxy_async_global();  // ... and are ordered with the generic release below
    ptx::fence_acq_rel_gpu();         // the scales (generic stores) too
    ptx::named_barrier_sync(layout::MegaRoles::kL1DoneBarrier, layout::MegaRoles::kNumMathThreads);
    if (threadIdx.x == 0)
      ptx::red_add_release_gpu(p.ws.get_l2_arrival_mask(uint64_t(pool_block)), l2_mask_bit<BLOCK_N>(n_begin));
  }
};

// The warpgroup's 64 x kWgN fp32 slice -> bf16, per 64-column slab through the warp's staging rows; lane r < 16
// stores row r of the warp's 16 rows to combine[src_token][src_topk] on rank src_rank (valid rows, columns < H).
template <int BLOCK_M, int BLOCK_N>
__device__ __forceinline__ void epilogue_l2_writeback(
    const MegaParams& p, const gemm::kernel::Tile& tile, const gemm::kernel::WarpgroupSlice<BLOCK_M, BLOCK_N>& slice,
    const float (&acc)[gemm::kernel::WarpgroupSlice<BLOCK_M, BLOCK_N>::kNumAcc],
    const gemm::kernel::WarpStaging& staging) {
  using Slice = gemm::kernel::WarpgroupSlice<BLOCK_M, BLOCK_N>;
  const int H = p.ws.dims().hidden;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const int store_row = slice.row0 + warp * 16 + (lane % 16);
  const bool store_valid = lane < 16 && store_row < tile.num_rows;
  uint16_t* dst_row = nullptr;
  if (store_valid) {
    const layout::PoolRowSource src = *p.ws.get_l1_pool_src(uint64_t(tile.row_begin + store_row));
    dst_row = p.sym.map(p.ws.get_combine_row(src.src_token, src.src_topk), uint32_t(src.src_rank));
  }
#pragma unroll
  for (int h = 0; h < Slice::kNumHalves; ++h) {
    const int col = tile.n_begin + slice.col0 + 128 * h;
    if (col >= H) continue;  // half past H (partial last n-block); uniform over the warpgroup
#pragma unroll
    for (int slab = 0; slab < 2; ++slab) {
      gemm::kernel::stage_bf16_slab(staging, acc, h, slab);
      staging.publish(dst_row ? dst_row + col + 64 * slab : nullptr, 128);
    }
  }
}

// Swap-AB core (BLOCK_M 16, 32): math warpgroup wg's 128 weight rows (= output columns) x the tile's tokens
// (acc: swap_ab_k_loop's order) -> bf16 pairs straight into each token's combine row on its source rank
// (swap_ab_store_bf16_pairs: one shuffle pairs neighbouring columns; the even lane of a pair stores token 2t, the odd
// lane token 2t + 1). A warpgroup whose rows lie past H (the partial last n-block) stores nothing (swap_ab_active).
template <int BLOCK_M>
__device__ __forceinline__ void swap_ab_epilogue_l2_writeback(const MegaParams& p, const gemm::kernel::Tile& tile,
                                                              int wg, const float (&acc)[BLOCK_M]) {
  if (!gemm::kernel::swap_ab_active<256>(p.l2, tile, wg)) return;  // uniform over the warpgroup
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const bool odd = (lane / 4) % 2;
  const int col = tile.n_begin + 128 * wg + 16 * warp + lane / 4 - (odd ? 1 : 0);  // the pair's first column
  uint16_t* dst[BLOCK_M / 8];  // this lane's token of each 8-token group: its combine row on the source rank
#pragma unroll
  for (int c = 0; c < BLOCK_M / 8; ++c) {
    const int token = 8 * c + 2 * (lane % 4) + (odd ? 1 : 0);
    dst[c] = nullptr;
    if (token < tile.num_rows) {
      // L2-coherent load (no L1 line): the pull wrote the record during this kernel.
      const int4 rec = __ldcg(reinterpret_cast<const int4*>(p.ws.get_l1_pool_src(uint64_t(tile.row_begin + token))));
      const layout::PoolRowSource src{rec.x, rec.y, rec.z, rec.w};
      dst[c] = p.sym.map(p.ws.get_combine_row(src.src_token, src.src_topk), uint32_t(src.src_rank)) + col;
    }
  }
  gemm::kernel::swap_ab_store_bf16_pairs<BLOCK_M, 2>(acc, [&](int c, int offset, auto pair) {
    if (dst[c] != nullptr) *reinterpret_cast<__nv_bfloat162*>(dst[c] + offset) = pair();
  });
}

}  // namespace symmoe::mega::kernel
