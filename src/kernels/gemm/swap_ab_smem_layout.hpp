// Shared-memory layout of the swap-AB grouped GEMM core (plan::GemmCore::kSwapAB): the one place that knows its
// offsets and sizes (the host reads kDynamicBytes to launch; plan::gemm_smem_bytes must agree, checked below).
//   per stage   token tile A [BLOCK_M, 128] e4m3 (128B-swizzled by TMA), its scales [BLOCK_M + kSfaBoxPad] fp32
//               (params.hpp), and the weight tile of BLOCK_N rows (128: bf16 output, 256: the SwiGLU tile):
//                 FP8: B [BLOCK_N, 128] e4m3, 128B-swizzled (the WGMMA's A operand, read through a descriptor)
//                 FP4: B [BLOCK_N, 64 B] packed E2M1 in the transformed layout (fp4_word_layout.hpp: each thread's
//                      fragments of a row are 16 contiguous bytes) + its scale codes [BLOCK_N] int32
//   fixed       the FP4 upconversion tables (fp4_upconvert.hpp, plan::kGemmFp4TableBytes); SwiGLU tiles: the
//               per-token amax exchange of the 8 math warps, [2 tile parities][8 warps][kGemmSwapAbMaxBlockM] fp32
//   barriers    full[kNumStages] (the producer's arrive + the TMA bytes), empty[kNumStages] (one arrive per math warp)
#pragma once

#include <cstdint>

#include "kernels/gemm/fp4_upconvert.hpp"
#include "kernels/gemm/params.hpp"
#include "kernels/gemm/stage_barriers.hpp"
#include "kernels/ptx/mbarrier.cuh"

namespace symmoe::gemm::kernel {

template <int BLOCK_M, int BLOCK_N, int kNumStages, bool kFp4>
struct SwapAbSmemLayout {
  static constexpr bool kSwiglu = BLOCK_N == 256;
  static constexpr int kBlockK = 128;
  static constexpr int kABytes = BLOCK_M * kBlockK;
  static constexpr int kBBytes = kFp4 ? BLOCK_N * kBlockK / 2 : BLOCK_N * kBlockK;
  static constexpr int kCodesBytes = kFp4 ? BLOCK_N * 4 : 0;
  static constexpr int kSfaBoxBytes = (BLOCK_M + kSfaBoxPad) * 4;
  static constexpr int kSfaBytes = (kSfaBoxBytes + 127) / 128 * 128;
  static constexpr int kBOffset = 0;
  static constexpr int kAOffset = kBOffset + kNumStages * kBBytes;
  static constexpr int kSfaOffset = kAOffset + kNumStages * kABytes;
  static constexpr int kCodesOffset = kSfaOffset + kNumStages * kSfaBytes;
  static constexpr int kTablesOffset = kCodesOffset + kNumStages * kCodesBytes;
  static constexpr int kAmaxOffset = kTablesOffset + plan::kGemmFp4TableBytes;
  static constexpr int kAmaxBytes = kSwiglu ? 2 * 8 * plan::kGemmSwapAbMaxBlockM * 4 : 0;
  static constexpr int kBarrierOffset = kAmaxOffset + kAmaxBytes;
  static constexpr int kBytes = kBarrierOffset + 2 * kNumStages * 8;
  static constexpr int kDynamicBytes = kBytes + 1024;  // slack to align the base to 1024 bytes
  static constexpr int kStageTxBytes = kABytes + kBBytes + kCodesBytes + kSfaBoxBytes;
  static_assert(BLOCK_M == 16 || BLOCK_M == 32 || BLOCK_M == 64, "swap-AB token tiles: 16, 32, 64");
  static_assert(BLOCK_N == 128 || BLOCK_N == 256, "swap-AB weight tiles: 128 rows (bf16), 256 (SwiGLU)");
  static_assert(kBBytes % 1024 == 0 && kABytes % 1024 == 0, "swizzled tiles keep 1024-byte alignment");
  static_assert(kSfaOffset % 128 == 0 && kCodesOffset % 16 == 0 && kTablesOffset % 16 == 0 && kBarrierOffset % 8 == 0,
                "alignment");
  static_assert(kFp4NumShifts * int(sizeof(Fp4ShiftTable)) <= plan::kGemmFp4TableBytes, "upconversion tables");
  static_assert(kDynamicBytes <= 232448, "shared memory over the 227 KiB per-block limit: fewer stages");
  static_assert(kDynamicBytes == plan::gemm_smem_bytes(BLOCK_M, BLOCK_N, kNumStages, false,
                                                       kFp4 ? plan::GemmWeights::kFp4 : plan::GemmWeights::kFp8, false,
                                                       plan::GemmCore::kSwapAB),
                "the planner's shared-memory model (plan::gemm_smem_bytes) disagrees with this layout");

  uint8_t* base;
  __device__ uint8_t* a(int s) const { return base + kAOffset + s * kABytes; }
  __device__ uint8_t* b(int s) const { return base + kBOffset + s * kBBytes; }  // FP8 tile
  __device__ uint8_t* b_fp4(int s) const { return base + kBOffset + s * kBBytes; }
  __device__ uint32_t* codes(int s) const { return reinterpret_cast<uint32_t*>(base + kCodesOffset + s * kCodesBytes); }
  __device__ float* sfa(int s) const { return reinterpret_cast<float*>(base + kSfaOffset + s * kSfaBytes); }
  __device__ Fp4ShiftTable* fp4_tables() const { return reinterpret_cast<Fp4ShiftTable*>(base + kTablesOffset); }
  // SwiGLU tiles: math warp w's (0..7) per-token amax of the tile of parity `parity`.
  __device__ float* amax(int parity, int warp) const {
    return reinterpret_cast<float*>(base + kAmaxOffset) + (parity * 8 + warp) * plan::kGemmSwapAbMaxBlockM;
  }
  __device__ StageBarriers<kNumStages> stage_barriers() const {
    return {reinterpret_cast<uint64_t*>(base + kBarrierOffset)};
  }
  __device__ uint64_t* full(int s) const { return stage_barriers().full(s); }
  __device__ uint64_t* raw_full(int s) const { return full(s); }  // the FP4 producer's name for it
  __device__ uint64_t* empty(int s) const { return stage_barriers().empty(s); }
  __device__ void init_stage_barriers(uint32_t consumer_arrivals) const { stage_barriers().init(consumer_arrivals); }
};

}  // namespace symmoe::gemm::kernel
