// Shared-memory layout of the grouped GEMM kernel: the one place that knows offsets and sizes (the host reads
// kDynamicBytes to launch, the kernel reads the pointers).
// Per pipeline stage: A tile [BLOCK_M, 128] e4m3, B tile [BLOCK_N, 128] e4m3 (both 128B-swizzled by TMA, each tile
// 1024-byte aligned), A scales [BLOCK_M + kSfaBoxPad] fp32 (params.hpp). Then the L1 epilogue's amax exchange
// [2 parities][2 wg][64 rows], the epilogue staging rows (8 math warps x 16 rows x 144 B, epilogue_staging.cuh; with
// kTileBuffer 16 rows x (2 BLOCK_N + 16) B, epilogue_tile_buffer.cuh) and the full/empty mbarriers.
// The total is plan::gemm_smem_bytes (the planner's number), checked below.
#pragma once

#include <cstdint>

#include "kernels/gemm/params.hpp"
#include "kernels/ptx/mbarrier.cuh"

namespace symmoe::gemm::kernel {

template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kTileBuffer = false>
struct GemmSmemLayout {
  static constexpr int kBlockK = 128;  // bytes of e4m3 per row per stage = the 128B swizzle span
  static constexpr int kABytes = BLOCK_M * kBlockK;
  static constexpr int kBBytes = BLOCK_N * kBlockK;
  static constexpr int kSfaBoxBytes = (BLOCK_M + kSfaBoxPad) * 4;  // what TMA writes per stage
  static constexpr int kSfaBytes = (kSfaBoxBytes + 127) / 128 * 128;  // stage stride (TMA destination alignment)
  static constexpr int kAOffset = 0;
  static constexpr int kBOffset = kAOffset + kNumStages * kABytes;
  static constexpr int kSfaOffset = kBOffset + kNumStages * kBBytes;
  static constexpr int kAmaxOffset = kSfaOffset + kNumStages * kSfaBytes;
  static constexpr int kAmaxBytes = 2 * 2 * 64 * 4;
  static constexpr int kStagingOffset = kAmaxOffset + kAmaxBytes;
  static constexpr int kStagingRowBytes =
      kTileBuffer ? plan::gemm_tile_buffer_row_bytes(BLOCK_N) : plan::kGemmStagingRowBytes;
  static constexpr int kStagingWarpBytes = 16 * kStagingRowBytes;
  static constexpr int kBarrierOffset = kStagingOffset + plan::gemm_staging_bytes(BLOCK_N, kTileBuffer);
  static constexpr int kBytes = kBarrierOffset + 2 * kNumStages * 8;
  static constexpr int kDynamicBytes = kBytes + 1024;  // slack to align the base to 1024 bytes
  static constexpr int kStageTxBytes = kABytes + kBBytes + kSfaBoxBytes;
  static_assert(kABytes % 1024 == 0 && kBBytes % 1024 == 0, "tiles must keep 1024-byte alignment (128B swizzle)");
  static_assert(kDynamicBytes <= 232448, "shared memory over the 227 KiB per-block limit: fewer stages");
  static_assert(kStagingWarpBytes * 8 == plan::gemm_staging_bytes(BLOCK_N, kTileBuffer), "8 math warps' staging");
  static_assert(kDynamicBytes == plan::gemm_smem_bytes(BLOCK_M, BLOCK_N, kNumStages, kTileBuffer),
                "the planner's shared-memory model (plan::gemm_smem_bytes) disagrees with this layout");
  static_assert(kStagingOffset % 16 == 0 && kStagingRowBytes % 16 == 0, "bulk-store sources are 16-byte aligned");

  uint8_t* base;
  __device__ uint8_t* a(int s) const { return base + kAOffset + s * kABytes; }
  __device__ uint8_t* b(int s) const { return base + kBOffset + s * kBBytes; }
  __device__ float* sfa(int s) const { return reinterpret_cast<float*>(base + kSfaOffset + s * kSfaBytes); }
  __device__ float* amax(int parity, int wg) const {
    return reinterpret_cast<float*>(base + kAmaxOffset) + (parity * 2 + wg) * 64;
  }
  // 16 staging rows of math warp w (0..7) of the CTA.
  __device__ uint8_t* staging(int w) const { return base + kStagingOffset + w * kStagingWarpBytes; }
  __device__ uint64_t* full(int s) const { return reinterpret_cast<uint64_t*>(base + kBarrierOffset) + s; }
  __device__ uint64_t* empty(int s) const {
    return reinterpret_cast<uint64_t*>(base + kBarrierOffset) + kNumStages + s;
  }
  // One thread, before the CTA's first sync: full barriers complete on the producer's arrive + the stage's TMA
  // bytes, empty barriers on one arrive per consumer warp (consumer_arrivals).
  __device__ void init_stage_barriers(uint32_t consumer_arrivals) const {
    for (int s = 0; s < kNumStages; ++s) {
      ptx::mbarrier_init(full(s), 1);
      ptx::mbarrier_init(empty(s), consumer_arrivals);
    }
    ptx::fence_mbarrier_init_cluster();
  }
};

// Position in the stage ring; the phase bit flips each time the ring wraps.
template <int kNumStages>
struct PipelineState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kNumStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

}  // namespace symmoe::gemm::kernel
