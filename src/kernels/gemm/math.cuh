// Math role: one warpgroup computes a 64 x kWgN slice (kWgN = 128 or 256) of the CTA's tile with WGMMA
// m64n128k32 (e4m3 -> fp32) and promotes per 128-wide K block into fp32 registers:
// acc = fmaf(sa[row] * sb, partial, acc) (docs/design.md §3.3; the golden model's ref::gemm_faithful).
// Tile shapes (two math warpgroups):
//   128 x 128: warpgroup w takes rows [64w, 64w + 64), all 128 columns;
//    64 x 256 ("split N"): both take rows [0, 64), warpgroup w takes columns [128w, 128w + 128);
//   128 x 256: warpgroup w takes rows [64w, 64w + 64), all 256 columns, as two 128-column halves that share one
//              partial accumulator (issue half, wait, promote, next half).
// NOTES: registers: 64 partial + kWgN / 2 accumulators per thread (128 + 64 for 128 x 256). Each warp releases a
// stage right after its last WGMMAs of the stage complete, before the last promotion.
// NOTES: issue order. Both warpgroups wake on the same full barrier; issuing their WGMMA batches at the same time
// makes them finish together and then promote together, leaving the tensor cores idle. So they take turns (named
// barriers kIssueBarrier0/1: warpgroup w waits for its turn, issues its batch, hands the turn over), and one
// warpgroup's promotion overlaps the other's batch (1.05-1.15x over issuing without turns; docs/notes/gemm.md).
// The promotion costs ~15% of the mainloop's cycles on the L1/L2 shapes (docs/notes/gemm.md: what the power cap
// leaves); two partial accumulators per warpgroup and an issue lag between the warpgroups measured no gain.
#pragma once

#include <type_traits>

#include "kernels/gemm/params.hpp"
#include "kernels/gemm/scheduler.cuh"
#include "kernels/gemm/smem_layout.hpp"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/wgmma.cuh"

namespace symmoe::gemm::kernel {

constexpr int kIssueBarrier0 = 2;  // named barrier ids 2, 3 (0: __syncthreads, 1: the L1 epilogue exchange)

// Warpgroup wg's turn to issue (all 128 threads wait; the other warpgroup's 128 threads arrived).
__device__ __forceinline__ void wait_issue_turn(int wg) { ptx::named_barrier_sync(kIssueBarrier0 + wg, 256); }
__device__ __forceinline__ void pass_issue_turn(int wg) { ptx::named_barrier_arrive(kIssueBarrier0 + (wg ^ 1), 256); }

// Where a math warpgroup's 64 x kWgN slice sits in the CTA tile.
template <int BLOCK_M, int BLOCK_N>
struct WarpgroupSlice {
  static_assert((BLOCK_M == 128 && (BLOCK_N == 128 || BLOCK_N == 256)) || (BLOCK_M == 64 && BLOCK_N == 256),
                "two math warpgroups: BLOCK_M x BLOCK_N must be 128 x 128, 128 x 256 or 64 x 256");
  static constexpr bool kSplitN = BLOCK_M == 64;
  static constexpr int kWgN = kSplitN ? BLOCK_N / 2 : BLOCK_N;
  static constexpr int kNumHalves = kWgN / 128;  // 128-column WGMMA passes per K block
  static constexpr int kNumAcc = kWgN / 2;
  int row0, col0;
  __device__ explicit WarpgroupSlice(int wg) : row0(kSplitN ? 0 : 64 * wg), col0(kSplitN ? 128 * wg : 0) {}
};

// B block scales of one K block for the 128 columns starting at tile column `col`: (gate, up) of the SwiGLU tile,
// (s, s) otherwise; (0, 0) for columns past n (a partial last n-block, never stored).
template <EpilogueKind kEpilogue>
__device__ __forceinline__ float2 load_b_scales(const GemmParams& p, const Tile& tile, int col, int kb) {
  const int num_k_blocks = p.k / 128;
  if constexpr (kEpilogue == EpilogueKind::kSwigluFp8) {
    const int pair = (tile.expert_idx * (p.n / 256) + tile.n_begin / 256) * num_k_blocks + kb;
    return __ldg(reinterpret_cast<const float2*>(p.sfb) + pair);
  } else {
    if (tile.n_begin + col >= p.n) return make_float2(0.f, 0.f);
    const float s = __ldg(p.sfb + (tile.expert_idx * (p.n / 128) + (tile.n_begin + col) / 128) * num_k_blocks + kb);
    return make_float2(s, s);
  }
}

// load_b_scales of the tile's phase: kMixedPhases (the fused kernel, whose tiles alternate between L1 and L2) picks
// the layout at run time (bf16_tile: an L2 tile), otherwise kEpilogue's.
template <EpilogueKind kEpilogue, bool kMixedPhases>
__device__ __forceinline__ float2 load_b_scales_of_phase(const GemmParams& p, const Tile& tile, int col, int kb,
                                                         [[maybe_unused]] bool bf16_tile) {
  if constexpr (kMixedPhases)
    return bf16_tile ? load_b_scales<EpilogueKind::kBf16>(p, tile, col, kb)
                     : load_b_scales<EpilogueKind::kSwigluFp8>(p, tile, col, kb);
  else
    return load_b_scales<kEpilogue>(p, tile, col, kb);
}

// kSfbSmem (the standalone FP8 grouped GEMM: plan::gemm_b_scales_in_smem): the tile's B scales go through shared
// memory (GemmSmemLayout::sfb). Per chunk of plan::kGemmSfbChunkKBlocks K blocks the 256 math threads copy them from
// global memory into one buffer, float2 (gate, up) per K block and 128-column block of the tile ((s, s) for bf16;
// (0, 0) for a column block past n, a partial last n-block, never stored); the K loop reads its float2 with
// ld.shared. Math thread i holds float i of the chunk: K block i / (2 kColBlocks), column block (i / 2) % kColBlocks,
// component i % 2. A chunk past the last K block (K not a multiple of the chunk) is padded with zeros, never read.
// NOTES: each thread issues its load at the start of the chunk's first K block; after that block's first WGMMA
// batch both math warpgroups meet on kBScaleBarrier (the other warpgroup is done reading the previous chunk), store,
// and meet again (the chunk is stored) before the first promotion, so the load latency and the barriers sit behind
// the barrier wait and the WGMMAs. One buffer and two barriers per chunk: a second buffer would keep its parity in
// a register across the K loop, which spilled the 128 x 256 tile (ptxas, nvcc 13.0; docs/notes/gemm.md).
constexpr int kBScaleBarrier = 4;  // named barrier id, 256 math threads (the FP4 math's conversion barriers reuse 4
                                   // and 5 in kernels that do not stage the B scales)
static_assert(kBScaleBarrier >= kIssueBarrier0 + 2, "the B-scale barrier must not reuse the issue-turn ids");

template <int BLOCK_N>
struct BScaleChunk {
  static constexpr int kKBlocks = plan::kGemmSfbChunkKBlocks;
  static constexpr int kColBlocks = BLOCK_N / 128;
  static constexpr int kNumFloats = kKBlocks * kColBlocks * 2;
  static_assert(kNumFloats <= 256, "one B-scale float per math thread and chunk");
  static_assert((kKBlocks & (kKBlocks - 1)) == 0, "a power of 2: kb % kKBlocks is a mask");
};

// Math thread `i`'s float of the tile's first chunk: its index in p.sfb, or -1 when it has none (i past the chunk, a
// column block past n). Its float of the chunk at K block kb0 is at index + kb0 (bf16) or + 2 kb0 (SwiGLU pairs).
template <int BLOCK_N, EpilogueKind kEpilogue>
__device__ __forceinline__ int b_scale_chunk_index(const GemmParams& p, const Tile& tile, int i) {
  using Chunk = BScaleChunk<BLOCK_N>;
  const int num_k_blocks = p.k / 128;
  const int kb = i / (2 * Chunk::kColBlocks);
  if (i >= Chunk::kNumFloats) return -1;
  if constexpr (kEpilogue == EpilogueKind::kSwigluFp8) {
    return ((tile.expert_idx * (p.n / 256) + tile.n_begin / 256) * num_k_blocks + kb) * 2 + i % 2;
  } else {
    const int col = tile.n_begin + 128 * ((i / 2) % Chunk::kColBlocks);
    return col < p.n ? (tile.expert_idx * (p.n / 128) + col / 128) * num_k_blocks + kb : -1;
  }
}

// Math thread `i`'s float of the chunk at K block kb0 (index: b_scale_chunk_index); 0 when it has none.
template <int BLOCK_N, EpilogueKind kEpilogue>
__device__ __forceinline__ float load_b_scale_chunk(const GemmParams& p, int index, int kb0, int i) {
  const int kb = kb0 + i / (2 * BScaleChunk<BLOCK_N>::kColBlocks);
  if (index < 0 || kb >= p.k / 128) return 0.f;
  return __ldg(p.sfb + index + (kEpilogue == EpilogueKind::kSwigluFp8 ? 2 * kb0 : kb0));
}

// This warp's arrive on the stage's empty barrier once its WGMMAs reading the stage have completed: one arrive per
// warp on every CTA of the cluster (lane c arrives on CTA c: the peer's producer multicasts into this CTA's stage).
template <int kClusterM>
__device__ __forceinline__ void release_stage(uint64_t* empty, int lane) {
  __syncwarp();
  if constexpr (kClusterM == 1) {
    if (lane == 0) ptx::mbarrier_arrive(empty);
  } else {
    if (lane < kClusterM) ptx::mbarrier_arrive_remote_release_cta(empty, lane);
  }
}

// One 64 x 128 x 128 WGMMA batch (4 x k32) into `partial` (zeroed by the first), in this warpgroup's issue turn.
__device__ __forceinline__ void issue_batch(int wg, float (&partial)[64], uint64_t desc_a, uint64_t desc_b) {
#pragma unroll
  for (int i = 0; i < 64; ++i) ptx::fence_operand(partial[i]);
  wait_issue_turn(wg);
  ptx::wgmma_fence();
#pragma unroll
  for (int k = 0; k < 4; ++k) ptx::wgmma_m64n128k32_e4m3(partial, desc_a + 2 * k, desc_b + 2 * k, k > 0);
  ptx::wgmma_commit_group();
  pass_issue_turn(wg);
}

// acc += scale * partial for one 128-column half; scale[r] per thread row r, chunk c (8 columns) of the SwiGLU tile
// is gate when c is even, up when odd (interleave by 8); for bf16 gate == up.
__device__ __forceinline__ void promote(float* acc_half, const float (&partial)[64], const float (&s_gate)[2],
                                        const float (&s_up)[2]) {
#pragma unroll
  for (int c = 0; c < 16; ++c)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const int i = 4 * c + 2 * r + b;
        acc_half[i] = fmaf((c & 1) ? s_up[r] : s_gate[r], partial[i], acc_half[i]);
      }
}

// Runs the K loop of one tile for this warpgroup; acc holds the promoted fp32 result on return. A 64 x 256 slice
// is two 128-column halves sharing one partial accumulator (issue half, wait, promote, next half).
// kFp4 (fp4_converter.cuh): the B tile of K block j is E4M3 tile j % C of the converters' ring (full completes on
// their arrives, conv_empty is released with the raw stage); with R = 2C raw stages, j % C = stage % C and the
// tile's phase is (stage / C) & 1, so no second ring position is kept (its registers spilled the 128 x 256 tile).
// The raw stage's raw_full is waited on too, so that this thread acquires the A tile and scales that TMA wrote.
// kSfbSmem (deduced from the layout: the kernel entry decides; FP8 weights, one epilogue kind): the B scales staged
// in shared memory per chunk (above), a loop of its own; the chunk's first K block is its own copy of the loop body,
// so the loop has no per-block staging branch. Otherwise (the FP4 kernels, the fused kernel) the B scales are loaded
// per K block from global memory by the general loop below.
template <int BLOCK_M, int BLOCK_N, int kNumStages, int kClusterM, EpilogueKind kEpilogue, bool kTileBuffer = false,
          bool kFp4 = false, bool kSfbSmem = false>
__device__ __forceinline__ void math_mainloop(
    const GemmParams& p, const GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kTileBuffer, kFp4, kSfbSmem>& smem,
    const Tile& tile, const WarpgroupSlice<BLOCK_M, BLOCK_N>& slice, int wg, PipelineState<kNumStages>& pipe,
    float (&acc)[WarpgroupSlice<BLOCK_M, BLOCK_N>::kNumAcc]) {
  constexpr int kConvStages = plan::kGemmFp4ConvStages;
  static_assert(!kFp4 || kNumStages == 2 * kConvStages, "FP4: the E4M3 ring position is derived from R = 2C");
  static_assert(!kSfbSmem || !kFp4, "staged B scales: FP8 weights");
  using Slice = WarpgroupSlice<BLOCK_M, BLOCK_N>;
  using Chunk = BScaleChunk<BLOCK_N>;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  const int sfa_row = slice.row0 + warp * 16 + lane / 4 + (tile.row_begin & (kSfaBoxPad - 1));
  const int num_k_blocks = p.k / 128;
#pragma unroll
  for (int i = 0; i < Slice::kNumAcc; ++i) acc[i] = 0.f;
  float partial[64];  // local to the K loop, so it is dead during the epilogue
#pragma unroll
  for (int i = 0; i < 64; ++i) partial[i] = 0.f;

  if constexpr (kSfbSmem) {
    const int sfb_thread = threadIdx.x % 256;  // this math thread's float of each B-scale chunk
    const int sfb_src = b_scale_chunk_index<BLOCK_N, kEpilogue>(p, tile, sfb_thread);
    // K block kb of the staged loop (FP8 weights, one epilogue kind); kFirst: the chunk's first K block, which
    // stages the chunk (see above).
    auto k_block = [&](auto first, int kb) {
      constexpr bool kFirst = decltype(first)::value;
      [[maybe_unused]] float staged = 0.f;
      if constexpr (kFirst) staged = load_b_scale_chunk<BLOCK_N, kEpilogue>(p, sfb_src, kb, sfb_thread);
      ptx::mbarrier_wait_parity(smem.full(pipe.stage), pipe.phase);
      const float sa0 = smem.sfa(pipe.stage)[sfa_row];
      const float sa1 = smem.sfa(pipe.stage)[sfa_row + 8];
      const uint64_t desc_a = ptx::wgmma_desc_k128b(ptx::smem_addr(smem.a(pipe.stage) + slice.row0 * 128));
#pragma unroll
      for (int h = 0; h < Slice::kNumHalves; ++h) {
        issue_batch(wg, partial, desc_a,
                    ptx::wgmma_desc_k128b(ptx::smem_addr(smem.b(pipe.stage) + (slice.col0 + 128 * h) * 128)));
        if constexpr (kFirst) {
          if (h == 0) {
            ptx::named_barrier_sync(kBScaleBarrier, 256);  // both warpgroups done reading the previous chunk
            if (sfb_thread < Chunk::kNumFloats) reinterpret_cast<float*>(smem.sfb())[sfb_thread] = staged;
            ptx::named_barrier_sync(kBScaleBarrier, 256);  // the chunk's scales stored
          }
        }
        const float2 sb = smem.sfb()[(kb % Chunk::kKBlocks) * Chunk::kColBlocks + slice.col0 / 128 + h];
        ptx::wgmma_wait_group<0>();
#pragma unroll
        for (int i = 0; i < 64; ++i) ptx::fence_operand(partial[i]);
        if (h == Slice::kNumHalves - 1) release_stage<kClusterM>(smem.empty(pipe.stage), lane);
        const float s_gate[2] = {sa0 * sb.x, sa1 * sb.x};
        const float s_up[2] = {sa0 * sb.y, sa1 * sb.y};
        promote(acc + 64 * h, partial, s_gate, s_up);
      }
      pipe.advance();
    };
    for (int kb = 0; kb < num_k_blocks;) {
      k_block(std::true_type{}, kb);
      const int chunk_end = min(kb + Chunk::kKBlocks, num_k_blocks);
      for (++kb; kb < chunk_end; ++kb) k_block(std::false_type{}, kb);
    }
  } else {
    // NOTES: the B-scale loads are issued per K block and used after the first WGMMA batch (ptxas places them
    // inside it); prefetching them one K block ahead measured slower (docs/notes/gemm.md).
    for (int kb = 0; kb < num_k_blocks; ++kb) {
      float2 sb[Slice::kNumHalves];
#pragma unroll
      for (int h = 0; h < Slice::kNumHalves; ++h) {
        sb[h] = load_b_scales<kEpilogue>(p, tile, slice.col0 + 128 * h, kb);
      }
      int b_stage = pipe.stage;
      if constexpr (kFp4) {
        b_stage = pipe.stage % kConvStages;
        ptx::mbarrier_wait_parity(smem.full(b_stage), uint32_t(pipe.stage / kConvStages) & 1);
        ptx::mbarrier_wait_parity(smem.raw_full(pipe.stage), pipe.phase);
      } else {
        ptx::mbarrier_wait_parity(smem.full(pipe.stage), pipe.phase);
      }
      const float sa0 = smem.sfa(pipe.stage)[sfa_row];
      const float sa1 = smem.sfa(pipe.stage)[sfa_row + 8];
      const uint64_t desc_a = ptx::wgmma_desc_k128b(ptx::smem_addr(smem.a(pipe.stage) + slice.row0 * 128));
#pragma unroll
      for (int h = 0; h < Slice::kNumHalves; ++h) {
        issue_batch(wg, partial, desc_a,
                    ptx::wgmma_desc_k128b(ptx::smem_addr(smem.b(b_stage) + (slice.col0 + 128 * h) * 128)));
        ptx::wgmma_wait_group<0>();
#pragma unroll
        for (int i = 0; i < 64; ++i) ptx::fence_operand(partial[i]);
        if (h == Slice::kNumHalves - 1) {
          release_stage<kClusterM>(smem.empty(pipe.stage), lane);
          if constexpr (kFp4) release_stage<1>(smem.conv_empty(b_stage), lane);
        }
        const float s_gate[2] = {sa0 * sb[h].x, sa1 * sb[h].x};
        const float s_up[2] = {sa0 * sb[h].y, sa1 * sb[h].y};
        promote(acc + 64 * h, partial, s_gate, s_up);
      }
      pipe.advance();
    }
  }
}

}  // namespace symmoe::gemm::kernel
