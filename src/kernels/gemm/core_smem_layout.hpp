// Shared-memory layout of the one-batch grouped GEMM core (plan::GemmCore::kOneBatch): the one place that knows its
// offsets and sizes (the host reads kDynamicBytes to launch; plan::gemm_smem_bytes must agree, checked below).
//   D tile      the output tile, [kNumAtoms column atoms][128 rows][128 B], 128B-swizzled (16-byte chunk j of row r
//               at (j ^ r % 8) * 16), read by the TMA store (core_epilogue.cuh): bf16, BLOCK_N / 64 atoms written by
//               stmatrix; SwiGLU + FP8 (BLOCK_N 256), one atom: the e4m3 codes of the tile's 128 channels
//   per stage   A tile [128, 128] e4m3, B tile [BLOCK_N, 128] e4m3 (both 128B-swizzled by TMA), A scales
//               [128 + kSfaBoxPad] fp32 (params.hpp)
//   B scales    two buffers (tiles alternate; a warpgroup may start staging the next tile's while the other still
//               reads the current one's) of the tile's fp32 B block scales for every K block:
//               [2 buffers][2][plan::kGemmCoreMaxKBlocks], the 128-column scale block of the tile's first column,
//               then the next one (a 192-column tile spans two); SwiGLU: gate, then up
//   barriers    full[kNumStages], empty[kNumStages]
#pragma once

#include <cstdint>

#include "kernels/gemm/params.hpp"
#include "kernels/gemm/stage_barriers.hpp"
#include "kernels/ptx/mbarrier.cuh"

namespace symmoe::gemm::kernel {

template <int BLOCK_N, int kNumStages, EpilogueKind kEpilogue>
struct CoreSmemLayout {
  static constexpr int BLOCK_M = 128;
  static constexpr int kBlockK = 128;
  static constexpr bool kSwiglu = kEpilogue == EpilogueKind::kSwigluFp8;
  // m64n128 WGMMA batches per K block (plan::gemm_core_num_halves): 2 for the 256-column SwiGLU tile.
  static constexpr int kNumHalves = plan::gemm_core_num_halves(BLOCK_N);
  // 128-byte swizzle rows of the output tile: 64 bf16 columns each, or the SwiGLU tile's 128 e4m3 channels.
  static constexpr int kNumAtoms = kSwiglu ? 1 : BLOCK_N / 64;
  static constexpr int kAtomBytes = BLOCK_M * 128;
  static constexpr int kDBytes = kNumAtoms * kAtomBytes;
  static constexpr int kABytes = BLOCK_M * kBlockK;
  static constexpr int kBBytes = BLOCK_N * kBlockK;
  static constexpr int kSfaBoxBytes = (BLOCK_M + kSfaBoxPad) * 4;
  static constexpr int kSfaBytes = (kSfaBoxBytes + 127) / 128 * 128;
  static constexpr int kDOffset = 0;
  static constexpr int kAOffset = kDOffset + kDBytes;
  static constexpr int kBOffset = kAOffset + kNumStages * kABytes;
  static constexpr int kSfaOffset = kBOffset + kNumStages * kBBytes;
  static constexpr int kSfbOffset = kSfaOffset + kNumStages * kSfaBytes;
  static constexpr int kSfbBytes = 2 * 2 * plan::kGemmCoreMaxKBlocks * 4;
  static constexpr int kBarrierOffset = kSfbOffset + kSfbBytes;
  static constexpr int kBytes = kBarrierOffset + 2 * kNumStages * 8;
  static constexpr int kDynamicBytes = kBytes + 1024;  // slack to align the base to 1024 bytes
  static constexpr int kStageTxBytes = kABytes + kBBytes + kSfaBoxBytes;
  static_assert(kSwiglu ? BLOCK_N == 256 : BLOCK_N == 128 || BLOCK_N == 192,
                "one-batch tiles: 128 x 128 or 128 x 192 bf16, 128 x 256 SwiGLU + FP8");
  static_assert(kDBytes == plan::gemm_core_out_tile_bytes(BLOCK_N, kEpilogue), "the output tile");
  static_assert(kDBytes % 1024 == 0 && kABytes % 1024 == 0 && kBBytes % 1024 == 0,
                "swizzled tiles keep 1024-byte alignment");
  static_assert(kSfaOffset % 128 == 0 && kSfbOffset % 16 == 0 && kBarrierOffset % 8 == 0, "alignment");
  static_assert(kDynamicBytes <= 232448, "shared memory over the 227 KiB per-block limit: fewer stages");
  static_assert(kDynamicBytes == plan::gemm_smem_bytes(BLOCK_M, BLOCK_N, kNumStages, false, plan::GemmWeights::kFp8,
                                                       true, plan::GemmCore::kOneBatch, kEpilogue),
                "the planner's shared-memory model (plan::gemm_smem_bytes) disagrees with this layout");

  uint8_t* base;
  // Column atom `atom` of the D tile: row r at r * 128 bytes, swizzled.
  __device__ uint8_t* d_atom(int atom) const { return base + kDOffset + atom * kAtomBytes; }
  __device__ uint8_t* a(int s) const { return base + kAOffset + s * kABytes; }
  __device__ uint8_t* b(int s) const { return base + kBOffset + s * kBBytes; }
  __device__ float* sfa(int s) const { return reinterpret_cast<float*>(base + kSfaOffset + s * kSfaBytes); }
  // B scales of buffer `buffer`, indexed by K block: second = the tile's second 128-column scale block (SwiGLU: up).
  __device__ float* sfb(int buffer, int second) const {
    return reinterpret_cast<float*>(base + kSfbOffset) + (2 * buffer + second) * plan::kGemmCoreMaxKBlocks;
  }
  __device__ StageBarriers<kNumStages> stage_barriers() const {
    return {reinterpret_cast<uint64_t*>(base + kBarrierOffset)};
  }
  __device__ uint64_t* full(int s) const { return stage_barriers().full(s); }
  __device__ uint64_t* empty(int s) const { return stage_barriers().empty(s); }
  __device__ void init_stage_barriers(uint32_t consumer_arrivals) const { stage_barriers().init(consumer_arrivals); }
};

}  // namespace symmoe::gemm::kernel
