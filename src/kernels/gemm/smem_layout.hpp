// Shared-memory layout of the grouped GEMM kernel: the one place that knows offsets and sizes (the host reads
// kDynamicBytes to launch, the kernel reads the pointers).
// Per pipeline stage: A tile [BLOCK_M, 128] e4m3, B tile [BLOCK_N, 128] e4m3 (both 128B-swizzled by TMA, each tile
// 1024-byte aligned), A scales [BLOCK_M + kSfaBoxPad] fp32 (params.hpp). Then the L1 epilogue's amax exchange
// [2 parities][2 wg][64 rows], the epilogue staging rows (8 math warps x 16 rows x 144 B, epilogue_staging.cuh; with
// kTileBuffer 16 rows x (2 BLOCK_N + 16) B, epilogue_tile_buffer.cuh), with kSfbSmem the tile's B-scale chunk
// (plan::kGemmSfbChunkKBlocks K blocks x BLOCK_N / 128 float2, written and read by the math warps: math.cuh; the
// kernel entry picks kSfbSmem = plan::gemm_b_scales_in_smem) and the full/empty mbarriers.
// kFp4 (FP4 weights): two rings. The kNumStages "raw" stages hold A, A's scales, the packed FP4 B tile
// [BLOCK_N, 64 B] (unswizzled TMA box) and its UE8M0 scale codes [BLOCK_N] int32, with barriers raw_full (TMA bytes
// landed) and empty (math done with the stage). The kNumConvStages E4M3 B tiles (the b() tiles) are written by the
// upconversion: at BLOCK_M 64 (grouped GEMM and fused kernel) by the math warpgroups (math_fp4.cuh, ordered by named
// barriers, so their barriers full and conv_empty stay unused and uninitialised); at BLOCK_M 128 by converter warps
// (fp4_converter.cuh) with barriers full (converted) and conv_empty (math done with the tile) and one 8-byte slot
// per raw stage where the producer leaves the stage's base codes. Also the 15
// upconversion tables (Fp4ShiftTable, 8 B each). The total is plan::gemm_smem_bytes (the planner's number), checked
// below.
#pragma once

#include <cstdint>

#include "kernels/gemm/fp4_upconvert.hpp"
#include "kernels/gemm/params.hpp"
#include "kernels/ptx/mbarrier.cuh"

namespace symmoe::gemm::kernel {

template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kTileBuffer = false, bool kFp4 = false, bool kSfbSmem = false>
struct GemmSmemLayout {
  static_assert(!(kFp4 && kSfbSmem), "FP4 weights: the B scales are read from global memory (math_fp4.cuh, math.cuh)");
  static constexpr plan::GemmWeights kWeights = kFp4 ? plan::GemmWeights::kFp4 : plan::GemmWeights::kFp8;
  static constexpr int kBlockK = 128;  // bytes of e4m3 per row per stage = the 128B swizzle span
  static constexpr int kABytes = BLOCK_M * kBlockK;
  static constexpr int kBBytes = BLOCK_N * kBlockK;
  static constexpr int kBFp4Bytes = kFp4 ? BLOCK_N * kBlockK / 2 : 0;  // packed E2M1, two per byte
  static constexpr int kCodesBytes = kFp4 ? BLOCK_N * 4 : 0;           // one int32 of 4 UE8M0 codes per row
  static constexpr int kSfaBoxBytes = (BLOCK_M + kSfaBoxPad) * 4;      // what TMA writes per stage
  static constexpr int kSfaBytes = (kSfaBoxBytes + 127) / 128 * 128;   // stage stride (TMA destination alignment)
  static constexpr int kNumConvStages = kFp4 ? plan::kGemmFp4ConvStages : 0;
  static constexpr int kNumBStages = kFp4 ? kNumConvStages : kNumStages;  // E4M3 B tiles
  static constexpr int kAOffset = 0;
  static constexpr int kBOffset = kAOffset + kNumStages * kABytes;
  static constexpr int kBFp4Offset = kBOffset + kNumBStages * kBBytes;
  static constexpr int kSfaOffset = kBFp4Offset + kNumStages * kBFp4Bytes;
  static constexpr int kCodesOffset = kSfaOffset + kNumStages * kSfaBytes;
  static constexpr int kAmaxOffset = kCodesOffset + kNumStages * kCodesBytes;
  static constexpr int kAmaxBytes = 2 * 2 * 64 * 4;
  static constexpr int kStagingOffset = kAmaxOffset + kAmaxBytes;
  static constexpr int kStagingRowBytes =
      kTileBuffer ? plan::gemm_tile_buffer_row_bytes(BLOCK_N) : plan::kGemmStagingRowBytes;
  static constexpr int kStagingWarpBytes = 16 * kStagingRowBytes;
  static constexpr int kSfbOffset = kStagingOffset + plan::gemm_staging_bytes(BLOCK_N, kTileBuffer);
  static constexpr int kSfbColBlocks = BLOCK_N / 128;  // float2 (gate, up) per K block and 128-column block
  static constexpr int kSfbBytes = kSfbSmem ? plan::kGemmSfbChunkKBlocks * kSfbColBlocks * 8 : 0;
  static constexpr int kTableOffset = kSfbOffset + kSfbBytes;
  static constexpr int kTableBytes = kFp4 ? plan::kGemmFp4TableBytes : 0;
  static constexpr int kBarrierOffset = kTableOffset + kTableBytes;
  // Barriers: full[kNumBStages], empty[kNumStages], then with kFp4 raw_full[kNumStages], conv_empty[kNumConvStages].
  static constexpr int kNumBarriers = kNumBStages + kNumStages + (kFp4 ? kNumStages + kNumConvStages : 0);
  static constexpr int kBytes = kBarrierOffset + kNumBarriers * 8;
  static constexpr int kDynamicBytes = kBytes + 1024;  // slack to align the base to 1024 bytes
  // Bytes the stage's TMA loads complete on its first barrier (full, or raw_full with kFp4).
  static constexpr int kStageTxBytes = kABytes + (kFp4 ? kBFp4Bytes + kCodesBytes : kBBytes) + kSfaBoxBytes;
  static_assert(!kFp4 || kNumStages >= kNumConvStages, "FP4: at least as many raw stages as E4M3 tiles");
  static_assert(!kFp4 || (kFp4NumShifts * 8 <= 128 && 128 + kNumStages * 8 <= plan::kGemmFp4TableBytes),
                "the upconversion tables and the stages' base-code slots fit their region");
  static_assert(kABytes % 1024 == 0 && kBBytes % 1024 == 0, "tiles must keep 1024-byte alignment (128B swizzle)");
  static_assert(kDynamicBytes <= 232448, "shared memory over the 227 KiB per-block limit: fewer stages");
  static_assert(kStagingWarpBytes * 8 == plan::gemm_staging_bytes(BLOCK_N, kTileBuffer), "8 math warps' staging");
  static_assert(kSfbBytes == plan::gemm_sfb_smem_bytes(BLOCK_N, kSfbSmem) && kSfbOffset % 16 == 0,
                "the B-scale chunk: the planner's size, 16-byte aligned");
  static_assert(kDynamicBytes == plan::gemm_smem_bytes(BLOCK_M, BLOCK_N, kNumStages, kTileBuffer, kWeights, kSfbSmem),
                "the planner's shared-memory model (plan::gemm_smem_bytes) disagrees with this layout");
  static_assert(kStagingOffset % 16 == 0 && kStagingRowBytes % 16 == 0, "bulk-store sources are 16-byte aligned");
  static_assert(kBFp4Offset % 128 == 0 && kCodesOffset % 128 == 0 && kSfaOffset % 128 == 0 && kTableOffset % 8 == 0 &&
                    kBarrierOffset % 8 == 0,
                "TMA destinations 128-byte aligned, tables and barriers 8-byte aligned");

  uint8_t* base;
  __device__ uint8_t* a(int s) const { return base + kAOffset + s * kABytes; }
  // E4M3 B tile s: the stage's (FP8), converted tile s of the E4M3 ring (FP4).
  __device__ uint8_t* b(int s) const { return base + kBOffset + s * kBBytes; }
  __device__ float* sfa(int s) const { return reinterpret_cast<float*>(base + kSfaOffset + s * kSfaBytes); }
  // kFp4 only: the packed FP4 B tile (row r at r * 64 bytes), its scale codes (row r's int32), the tables.
  __device__ uint8_t* b_fp4(int s) const { return base + kBFp4Offset + s * kBFp4Bytes; }
  __device__ uint32_t* codes(int s) const { return reinterpret_cast<uint32_t*>(base + kCodesOffset + s * kCodesBytes); }
  __device__ Fp4ShiftTable* fp4_tables() const { return reinterpret_cast<Fp4ShiftTable*>(base + kTableOffset); }
  // Converter warps (fp4_converter.cuh): raw stage s's slot (base codes, or the stop mark).
  __device__ int2* fp4_base_codes(int s) const { return reinterpret_cast<int2*>(base + kTableOffset + 128) + s; }
  // kSfbSmem: the B-scale chunk, float2 [plan::kGemmSfbChunkKBlocks][kSfbColBlocks].
  __device__ float2* sfb() const {
    static_assert(kSfbSmem, "sfb: the layouts with kSfbSmem only");
    return reinterpret_cast<float2*>(base + kSfbOffset);
  }
  __device__ float* amax(int parity, int wg) const {
    return reinterpret_cast<float*>(base + kAmaxOffset) + (parity * 2 + wg) * 64;
  }
  // 16 staging rows of math warp w (0..7) of the CTA.
  __device__ uint8_t* staging(int w) const { return base + kStagingOffset + w * kStagingWarpBytes; }
  __device__ uint64_t* full(int s) const { return reinterpret_cast<uint64_t*>(base + kBarrierOffset) + s; }
  __device__ uint64_t* empty(int s) const {
    return reinterpret_cast<uint64_t*>(base + kBarrierOffset) + kNumBStages + s;
  }
  __device__ uint64_t* raw_full(int s) const {
    static_assert(kFp4, "raw_full: FP4 weights only");
    return reinterpret_cast<uint64_t*>(base + kBarrierOffset) + kNumBStages + kNumStages + s;
  }
  __device__ uint64_t* conv_empty(int c) const {
    static_assert(kFp4, "conv_empty: FP4 weights only");
    return reinterpret_cast<uint64_t*>(base + kBarrierOffset) + kNumBStages + 2 * kNumStages + c;
  }
  // One thread, before the CTA's first sync: empty (and conv_empty) barriers complete on one arrive per consumer
  // warp (consumer_arrivals). FP8: full barriers on the producer's arrive + the stage's TMA bytes. FP4: raw_full on
  // the producer's arrive + the TMA bytes, full on one arrive per converter warp (full_arrivals); full_arrivals 0:
  // no converter warps (the math warpgroups convert), full and conv_empty are not initialised.
  __device__ void init_stage_barriers(uint32_t consumer_arrivals, uint32_t full_arrivals = 1) const {
    for (int s = 0; s < kNumStages; ++s) {
      if constexpr (!kFp4) ptx::mbarrier_init(full(s), 1);
      ptx::mbarrier_init(empty(s), consumer_arrivals + (kFp4 ? full_arrivals : 0u));  // FP4: + the converters
      if constexpr (kFp4) ptx::mbarrier_init(raw_full(s), 1);
    }
    if constexpr (kFp4)
      for (int c = 0; c < kNumConvStages && full_arrivals > 0; ++c) {
        ptx::mbarrier_init(full(c), full_arrivals);
        ptx::mbarrier_init(conv_empty(c), consumer_arrivals);
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
