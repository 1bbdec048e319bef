// Math role of the one-batch core (plan::GemmCore::kOneBatch), in the standalone kernel (core_kernel.cuh) and the
// fused kernel at BLOCK_M 128 and (FP8) 64 (kernels/mega/mega_kernel.cuh). Tiles and warpgroup slices:
//   128 x BLOCK_N  math warpgroup wg computes rows [64 wg, 64 wg + 64) x all BLOCK_N columns. Per 128-wide K block:
//                  BLOCK_N 128 / 192 (bf16): one batch of 4 m64nBLOCK_Nk32 WGMMAs (e4m3 -> fp32) into the partial
//                  accumulator, wait, release the stage, then promote acc = fmaf(sa[row] * sb, partial, acc)
//                  (docs/notes/gemm.md; the golden model's ref::gemm_faithful). BLOCK_N 256 (SwiGLU + FP8, or bf16):
//                  two halves of 128 columns into one 64-register partial (issue half 0, wait, promote it into acc[0,
//                  64), issue half 1, wait, release the stage, promote into acc[64, 128)).
//   64 x 256       split N: warpgroup wg computes columns [128 wg, 128 wg + 128) of rows [0, 64): one m64n128 batch per
//                  K block into a 64-register partial, wait, release the stage, promote into acc[0, 64).
// The 256-column tiles promote with the two-halves core's arithmetic (math.cuh's promote; SwiGLU: gate or up scale by
// chunk; bf16: the scale of the 128-column scale block the half or the split-N slice lies in), so their results are
// bitwise equal to that core's 128 x 256 and 64 x 256 tiles. The two warpgroups issue independently: while one
// promotes, the other's batch runs.
// B scales: a BLOCK_N = 192 tile spans two 128-column scale blocks (n_begin % 128 is 0 or 64; core_promote says which
// chunk takes which), a 256-column bf16 tile two whole ones; the SwiGLU tile has a gate and an up scale per K block.
// Each math warpgroup stages its own copy of the tile's scales of every K block in shared memory (CoreSmemLayout::sfb,
// two buffers per warpgroup by tile parity) before its K loop; the loop reads them with ld.shared (ptxas issues them
// ahead of the stage's full-barrier wait).
// Layout: any CoreSmemLayout (the standalone kernel's output tiles, the fused kernel's staging rows); kEpilogue picks
// the B-scale layout and the promotion, so one layout serves both phases of the fused kernel.
// NOTES: registers per math thread: kWgN / 2 / kNumHalves partial + kWgN / 2 accumulators (96 + 96 for BLOCK_N 192,
// 64 + 128 for 128 x 256, 64 + 64 for the split-N 64 x 256).
#pragma once

#include <type_traits>

#include "kernels/gemm/core_smem_layout.hpp"
#include "kernels/gemm/math.cuh"
#include "kernels/gemm/scheduler.cuh"
#include "kernels/ptx/cluster.cuh"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/sync.cuh"
#include "kernels/ptx/wgmma.cuh"

namespace symmoe::gemm::kernel {

// Named barrier ids of the standalone one-batch kernel's math threads (0 is __syncthreads); the fused kernel passes
// its own (layout::MegaRoles) to stage_core_b_scales.
// + wg: warpgroup wg's own barrier (128 threads): its copy of the tile's B scales staged (stage_core_b_scales); its
// half of the D tile free before it writes it, written before its TMA store (core_epilogue.cuh).
constexpr int kCoreEpilogueBarrier = 2;
// The split-N SwiGLU tile (64 x 256): its row amaxes exchanged between the warpgroups, and the output atom they share
// free before they write it, written before its TMA store (256 math threads; core_epilogue.cuh).
constexpr int kCoreAmaxBarrier = kCoreEpilogueBarrier + 2;
static_assert(kCoreEpilogueBarrier > 0 && kCoreAmaxBarrier > kCoreEpilogueBarrier + 1 && kCoreAmaxBarrier < 16,
              "the standalone one-batch kernel's named barriers must be distinct hardware ids");

// Chunks of 8 columns of a tile starting at column n_begin that take the first 128-column B scale block.
template <int BLOCK_N>
__device__ __forceinline__ int core_former_chunks(int n_begin) {
  return min(BLOCK_N, 128 - n_begin % 128) / 8;
}

// Math warpgroup wg (warp-uniform) copies the tile's B scales of every K block into its own shared-memory buffer
// smem.sfb(wg, parity, .) of the tile's parity: bf16: [0][kb] of the scale block of column n_begin, [1][kb] of the
// next one (0 where the tile does not reach it or it lies past n); SwiGLU: [0][kb] gate, [1][kb] up, from the (gate,
// up) pairs of the tile's 256-column block (params.hpp). Then one sync of the warpgroup's own barrier `wg_barrier`
// (its 128 threads; an id the kernel's roles own) orders the stores before this tile's K loop. No sync is needed
// before the stores: the buffer was last read in the K loop of tile t - 2, which every warp of the warpgroup left
// before it arrived at tile t - 1's sync. No barrier joins the two warpgroups, so each runs its tiles without
// waiting for the other's. K: at most the layout's kMaxKBlocks blocks (the planners refuse more).
template <EpilogueKind kEpilogue, int BLOCK_M, int BLOCK_N, int kNumStages, plan::GemmCoreOutput kOutput>
__device__ __forceinline__ void stage_core_b_scales(const GemmParams& p, const Tile& tile,
                                                    const CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kOutput>& smem,
                                                    int wg, int parity, int wg_barrier) {
  const int num_k_blocks = p.k / 128;
  const int thread = threadIdx.x % 128;
  // The store addresses depend only on wg, the parity and the thread: hoisted out of the tile loop, ptxas held them
  // through the K loop and spilled the 128 x 256 SwiGLU and 128 x 192 cluster-2 kernels.
  wg = ptx::unhoisted(wg);
  float* const first = smem.sfb(wg, parity, 0);
  float* const second = smem.sfb(wg, parity, 1);
  if constexpr (kEpilogue == EpilogueKind::kSwigluFp8) {
    static_assert(BLOCK_N == 256, "the SwiGLU tile is one 256-column block of (gate, up) pairs");
    const float* src = p.sfb + (size_t(tile.expert_idx) * (p.n / 256) + tile.n_begin / 256) * num_k_blocks * 2;
    for (int i = thread; i < 2 * num_k_blocks; i += 128) (i % 2 ? second : first)[i / 2] = __ldg(src + i);
  } else {
    const int first_block = tile.n_begin / 128;
    const bool has_second = core_former_chunks<BLOCK_N>(tile.n_begin) * 8 < BLOCK_N && (first_block + 1) * 128 < p.n;
    const float* src = p.sfb + size_t(tile.expert_idx) * (p.n / 128) * num_k_blocks;
    for (int i = thread; i < 2 * num_k_blocks; i += 128) {
      const int in_second = i >= num_k_blocks, kb = i - in_second * num_k_blocks;
      const float s = in_second && !has_second ? 0.f : __ldg(src + size_t(first_block + in_second) * num_k_blocks + kb);
      (in_second ? second : first)[kb] = s;
    }
  }
  ptx::named_barrier_sync(wg_barrier, 128);
}

// acc += scale * partial, the scale of 8-column chunk c: sa[r] * sb0 for c < 8, sa[r] * sb_mid for 8 <= c < 16,
// sa[r] * sb1 for c >= 16. A tile of BLOCK_N 192 starts at column 0 or 64 of a 128-column scale block, so only its
// middle chunks 8-15 change block with the tile (sb_mid is sb0 or sb1); BLOCK_N 128 never splits (sb_mid = sb0).
template <int kNumAcc>
__device__ __forceinline__ void core_promote(float (&acc)[kNumAcc], const float (&partial)[kNumAcc], float sa0,
                                             float sa1, float sb0, float sb_mid, float sb1) {
  const float s0[3] = {sa0 * sb0, sa0 * sb_mid, sa0 * sb1};
  const float s1[3] = {sa1 * sb0, sa1 * sb_mid, sa1 * sb1};
#pragma unroll
  for (int c = 0; c < kNumAcc / 4; ++c) {
    acc[4 * c + 0] = fmaf(s0[c / 8], partial[4 * c + 0], acc[4 * c + 0]);
    acc[4 * c + 1] = fmaf(s0[c / 8], partial[4 * c + 1], acc[4 * c + 1]);
    acc[4 * c + 2] = fmaf(s1[c / 8], partial[4 * c + 2], acc[4 * c + 2]);
    acc[4 * c + 3] = fmaf(s1[c / 8], partial[4 * c + 3], acc[4 * c + 3]);
  }
}

// core_k_loop's loop for one kind of tile, each choice known per tile: kActive, whether the warpgroup's rows hold a
// valid row (false: it issues no WGMMA, reads no scale and only passes the stages on); kMidFirst, whether the middle
// chunks 8-15 of a BLOCK_N 192 tile take the first 128-column scale block (core_promote; true for every other
// BLOCK_N); kWholeRounds, which of core_k_loop's two loops. As compile-time values they cost the loop nothing per K
// block (ptxas recomputed the first two in every K block). The 128 x 256 tile (two halves) keeps `active` a run-time
// test: as two loops ptxas spilled its 64 + 128 registers.
template <bool kActive, bool kMidFirst, bool kWholeRounds, int kClusterM, EpilogueKind kEpilogue, int BLOCK_M,
          int BLOCK_N, int kNumStages, plan::GemmCoreOutput kOutput>
__device__ __forceinline__ void core_k_loop_of(
    const GemmParams& p, const CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kOutput>& smem, const Tile& tile, int wg,
    int parity, bool active, PipelineState<kNumStages>& pipe,
    float (&acc)[CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kOutput>::kNumAcc]) {
  using Layout = CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kOutput>;
  static_assert(kClusterM == 1 || kClusterM == 2, "the stage release knows one peer CTA at most");
  constexpr bool kSwiglu = kEpilogue == EpilogueKind::kSwigluFp8;
  constexpr bool kSplitN = Layout::kSplitN;
  constexpr int kNumHalves = Layout::kNumHalves;
  constexpr int kBatchN = Layout::kWgN / kNumHalves;  // columns of one WGMMA batch
  constexpr int kNumPartial = kBatchN / 2;
  static_assert(kNumHalves == 1 || kBatchN == 128, "two halves: the 256-column tile's 2 x 128");
  static_assert(!kSplitN || kBatchN == 128, "split N: one n128 batch per warpgroup");
  static_assert(!kSwiglu || BLOCK_N == 256, "the SwiGLU tile is 256 columns");
  constexpr int kNumAcc = Layout::kNumAcc;
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
#pragma unroll
  for (int i = 0; i < kNumAcc; ++i) acc[i] = 0.f;
  // The warpgroup's first row and column in the tile (split N: rows [0, 64), columns [128 wg, 128 wg + 128)).
  const int row0 = kSplitN ? 0 : 64 * wg;
  const float* sfa0 = smem.sfa(0) + row0 + warp * 16 + lane / 4 + (tile.row_begin & (kSfaBoxPad - 1));
  // K block kb's B scales: sfb[kb], sfb[kb + Layout::kMaxKBlocks] (bf16: the two scale blocks; SwiGLU: gate, up).
  const float* sfb = smem.sfb(wg, parity, 0);
  const uint32_t a_lo0 = ptx::wgmma_desc_k128b_lo(ptx::smem_addr(smem.a(0) + row0 * 128));
  // Split N: the warpgroup's 128 B rows (its columns) start 128 wg rows of 128 B into the stage's B tile.
  const uint32_t b_lo0 = ptx::wgmma_desc_k128b_lo(ptx::smem_addr(smem.b(0) + (kSplitN ? 128 * wg * 128 : 0)));
  // The peer CTA's empty barriers (cluster 2): warp-uniform, so the address lives in a uniform register.
  const uint32_t peer_empty0 =
      kClusterM == 1 ? 0u : ptx::mapa_shared_cluster(ptx::smem_addr(smem.empty(0)), ptx::cluster_cta_rank() ^ 1u);
  // The first WGMMA of each batch is the accumulating form with scale-d 0 on a partial that stays in its registers
  // ("+f", as in math.cuh). With the overwriting form ("=f") ptxas is free to give each K block's partial new
  // registers, and did: the two-halves tile spilled its 128 + 64 accumulators, the whole-rounds loop below 172-192 B.
  float partial[kNumPartial];
#pragma unroll
  for (int i = 0; i < kNumPartial; ++i) partial[i] = 0.f;
  const bool issues = kNumHalves > 1 ? active : kActive;  // see above
  // One K block on stage s (a compile-time constant in every caller: the loops below are unrolled over the stages)
  // with its B scales at sfb_k.
  auto k_block = [&](const int s, const float* sfb_k, uint32_t phase_k) {
    const float sb0 = sfb_k[0];
    const float sb1 = BLOCK_N > 128 ? sfb_k[Layout::kMaxKBlocks] : 0.f;
    const float sb_mid = kMidFirst ? sb0 : sb1;
    ptx::mbarrier_wait_parity(smem.full(s), phase_k);
    const float sa0 = sfa0[s * (Layout::kSfaBytes / 4)];
    const float sa1 = sfa0[s * (Layout::kSfaBytes / 4) + 8];
#pragma unroll
    for (int h = 0; h < kNumHalves; ++h) {
      if (issues) {
        const uint32_t a_lo = a_lo0 + s * (Layout::kABytes / 16);
        // Half h reads B rows [128 h, 128 h + 128) of the stage: 128 h rows of 128 B in.
        const uint32_t b_lo = b_lo0 + s * (Layout::kBBytes / 16) + h * (kBatchN * 128 / 16);
        ptx::wgmma_fence();
        // The first WGMMA of the batch starts the partial sums afresh (scale-d 0; see partial above).
#pragma unroll
        for (int k = 0; k < 4; ++k)
          ptx::wgmma_m64nk32_e4m3<kBatchN>(partial, ptx::wgmma_desc_k128b_from_lo(a_lo + 2 * k),
                                           ptx::wgmma_desc_k128b_from_lo(b_lo + 2 * k), k > 0);
        ptx::wgmma_commit_group();
#pragma unroll
        for (int i = 0; i < kNumPartial; ++i) ptx::fence_operand(partial[i]);
        ptx::wgmma_wait_group<0>();
      }
      if (h == kNumHalves - 1) {
        __syncwarp();                 // the warp's reads of the stage (scales) are ordered before the release
        if (ptx::elect_one_sync()) {  // one lane per warp releases the stage in every CTA of the cluster
          ptx::mbarrier_arrive(smem.empty(s));
          if constexpr (kClusterM == 2) ptx::mbarrier_arrive_cluster_addr(peer_empty0 + 8 * s);
        }
      }
      if (issues) {
        if constexpr (kNumHalves > 1 || kSplitN) {
          // math.cuh's promotion: SwiGLU, chunk c of either half takes the gate scale (sb0) for even c, up (sb1)
          // for odd; bf16, every chunk of half h (split N: of warpgroup wg's slice) takes the scale of 128-column
          // scale block h (wg) (gate == up).
          const int block = kSplitN ? wg : h;
          const float sb_gate = kSwiglu || block == 0 ? sb0 : sb1;
          const float sb_up = kSwiglu || block == 1 ? sb1 : sb0;
          const float s_gate[2] = {sa0 * sb_gate, sa1 * sb_gate};
          const float s_up[2] = {sa0 * sb_up, sa1 * sb_up};
          promote(acc + kNumPartial * h, partial, s_gate, s_up);
        } else {
          core_promote(acc, partial, sa0, sa1, sb0, sb_mid, sb1);
        }
      }
    }
  };
  int stage = pipe.stage;
  uint32_t phase = pipe.phase;
  if constexpr (kWholeRounds) {
    // The tile starts at stage 0 and its K blocks are whole rounds of the stages: no per-copy stage test.
    const int num_k_blocks = p.k / 128;
    for (int kb = 0; kb < num_k_blocks; kb += kNumStages) {
#pragma unroll
      for (int s = 0; s < kNumStages; ++s) k_block(s, sfb + kb + s, phase);
      phase ^= 1;
    }
  } else {
    for (const float* const sfb_end = sfb + p.k / 128; sfb != sfb_end;) {
#pragma unroll
      for (int s = 0; s < kNumStages; ++s) {
        if (s != stage || sfb == sfb_end) continue;
        k_block(s, sfb, phase);
        ++sfb;
        ++stage;
      }
      if (stage == kNumStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
  pipe.stage = stage;
  pipe.phase = phase;
}

// The K loop of one tile for math warpgroup wg (warp-uniform); acc holds the promoted fp32 result on return. A
// warpgroup whose 64 rows all lie past the tile's valid rows (an expert's last m-block, a cluster rank without an
// n-block: scheduler.cuh) issues no WGMMA: it only passes the stages on, so the tile's tensor-core time is the
// other warpgroup's.
// The loop body is unrolled over the kNumStages stages, so each copy's stage is a compile-time constant: its
// barrier, tile and scale addresses are immediate offsets. Two loops:
//   whole rounds  the tile starts at stage 0 and its K blocks are a multiple of kNumStages (so the next tile starts
//                 at stage 0 too; every bench and layer shape at 4 stages): the copies run back to back, and ptxas
//                 overlaps one K block's promotion with the next one's barrier wait and scale loads;
//   general       a tile starts at the stage the previous one left (`pipe`): each copy tests whether it is the
//                 current stage, which keeps the copies apart.
// The split-N tile (64 x 256: masked decode and the fused kernel's BLOCK_M 64, bound by the weight stream) keeps the
// general loop: the whole-rounds schedule waits for the next stage before the previous promotion, which delays
// each stage's release (decode at 1 token: 1.05x the time). The per-tile choices (the warpgroup active, where a
// 192-column tile's middle chunks take their scale) pick one of core_k_loop_of's loops.
// NOTES: the descriptors are formed from warp-uniform values (wg, the shared-memory base), so they live in uniform
// registers. One elected lane per warp releases the stage on its own CTA's empty barrier and, with clusters, on the
// peer's (through its cluster address), after the stage's last batch has completed and before its promotion.
template <int kClusterM, EpilogueKind kEpilogue, int BLOCK_M, int BLOCK_N, int kNumStages, plan::GemmCoreOutput kOutput>
__device__ __forceinline__ void core_k_loop(
    const GemmParams& p, const CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kOutput>& smem, const Tile& tile, int wg,
    int parity, PipelineState<kNumStages>& pipe,
    float (&acc)[CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kOutput>::kNumAcc]) {
  using Layout = CoreSmemLayout<BLOCK_M, BLOCK_N, kNumStages, kOutput>;
  const bool active = (Layout::kSplitN ? 0 : 64 * wg) < tile.num_rows;  // the warpgroup's first row (split N: row 0)
  auto run = [&](auto whole_rounds) {
    constexpr bool kWholeRounds = decltype(whole_rounds)::value;
    if (Layout::kNumHalves == 1 && !active)
      core_k_loop_of<false, true, kWholeRounds, kClusterM, kEpilogue>(p, smem, tile, wg, parity, false, pipe, acc);
    else if (BLOCK_N == 192 && core_former_chunks<BLOCK_N>(tile.n_begin) != 16)
      core_k_loop_of<true, false, kWholeRounds, kClusterM, kEpilogue>(p, smem, tile, wg, parity, active, pipe, acc);
    else
      core_k_loop_of<true, true, kWholeRounds, kClusterM, kEpilogue>(p, smem, tile, wg, parity, active, pipe, acc);
  };
  if (!Layout::kSplitN && pipe.stage == 0 && (p.k / 128) % kNumStages == 0)
    run(std::true_type{});
  else
    run(std::false_type{});
}

}  // namespace symmoe::gemm::kernel
