// Converter role (FP4 weights): warps 1-3 of the producer warpgroup turn each raw stage's packed FP4 B tile into an
// E4M3 B tile of the converted ring (kNumConvStages tiles, smem_layout.hpp), in the 128B-swizzled K-major layout
// TMA gives the FP8 path: row r's 16-byte chunk c
// (columns 16c .. 16c + 15) at r * 128 + ((c ^ (r % 8)) * 16) from the 1024-byte aligned tile (the WGMMA descriptor
// of ptx::wgmma_desc_k128b). Element (r, c) = fmt::e2m1_times_pow2_to_e4m3(nibble, code(r, c / 32) - base_code(r))
// (fp4_upconvert.hpp), so the math warps promote with the fp32 base scales exactly as the FP8 path promotes with its
// block scales: the result is the FP8 kernel's on the host-expanded weights (expand_*_fp4), bit for bit.
// Protocol per K block j (smem_layout.hpp, producer_fp4.cuh): wait raw_full of raw stage j % R (the producer's TMA
// of the FP4 tile and codes, and its base-code slot), wait conv_empty of tile j % C (the math warps are done with
// the tile of block j - C), convert the warp's rows, fence the generic-proxy stores for the async proxy (WGMMA), one
// arrive per converter warp on full of tile j % C and on empty of raw stage j % R (so the producer's next write of
// the stage's base-code slot follows the converters' reads directly). The math warps wait for full and raw_full,
// then release both empty and conv_empty. Every wait depends only on earlier blocks or on the producer's block j, so
// nothing waits in a cycle; the producer refills a raw stage only after the math warps and the converters have all
// released it. The converters take the raw stages in ring order until the one that carries the stop
// mark, which the producer publishes after its last K block. (No scheduler copy here: it would not fit the
// producer warpgroup's 40 registers next to the loop.)
// NOTES: two E4M3 tiles (64 KiB for BLOCK_N 256) let the converters work one K block ahead of the math warps while
// the 4 FP4 stages, half the bytes, keep 4 K blocks of weights in flight (3 with per-stage E4M3 tiles). The math
// warps derive the tile from the raw stage (R = 2C, math.cuh); the converters keep their own ring position.
// NOTES: a warp converts 8 rows x 4 scale groups per step: per lane the four words of its group (fp4_word_layout.hpp:
// the warp's loads hit 32 different banks), one code word (broadcast within 4 lanes), one 8-byte table, 4 x 2 PRMT,
// and two 16-byte E4M3 chunks out (4 wavefronts per warp and chunk pair).
#pragma once

#include "kernels/gemm/fp4_upconvert.hpp"
#include "kernels/gemm/math.cuh"
#include "kernels/gemm/smem_layout.hpp"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::gemm::kernel {

constexpr int kNumConverterWarps = 3;
constexpr int kFp4StopMark = -1;  // base code of the stage after the last one (real codes are >= 0)

// The fold's base scale codes (fp32 exponent bits) of the tile's B rows in K block kb: bf16 tiles one per 128 rows
// (x: rows [0, 128), y: [128, 256)); SwiGLU tiles the (gate, up) pair of the 256 interleaved rows. Rows past n get
// code 0 (their columns are never stored).
template <EpilogueKind kEpilogue, int BLOCK_N>
__device__ __forceinline__ int2 load_base_codes(const GemmParams& p, const Tile& tile, int kb) {
  float2 s;
  if constexpr (kEpilogue == EpilogueKind::kSwigluFp8) {
    s = load_b_scales<kEpilogue>(p, tile, 0, kb);
  } else {
    s.x = load_b_scales<kEpilogue>(p, tile, 0, kb).x;
    s.y = BLOCK_N > 128 ? load_b_scales<kEpilogue>(p, tile, 128, kb).x : 0.f;
  }
  return make_int2(fmt::fold_base_code(s.x), fmt::fold_base_code(s.y));
}

template <EpilogueKind kEpilogue>
__device__ __forceinline__ int base_code_of_row(int2 base, int r) {
  if constexpr (kEpilogue == EpilogueKind::kSwigluFp8)
    return (r % 16) / 8 ? base.y : base.x;  // gate / up rows interleaved by 8 (weight_transform_fp4.hpp)
  else
    return r < 128 ? base.x : base.y;
}

// converter: 0 .. kNumConverterWarps - 1 (this warp's index among the converters).
template <int BLOCK_M, int BLOCK_N, int kNumStages, EpilogueKind kEpilogue>
__device__ __forceinline__ void run_converter(const GemmSmemLayout<BLOCK_M, BLOCK_N, kNumStages, false, true>& smem,
                                              int converter, int lane) {
  const int group = lane % 4, row_in_step = lane / 4;  // group: 32-column scale group
  const Fp4ShiftTable* tables = smem.fp4_tables();
  PipelineState<kNumStages> pipe;
  PipelineState<plan::kGemmFp4ConvStages> conv;
  while (true) {
    ptx::mbarrier_wait_parity(smem.raw_full(pipe.stage), pipe.phase);
    const int2 base = *smem.fp4_base_codes(pipe.stage);
    if (base.x == kFp4StopMark) break;
    ptx::mbarrier_wait_parity(smem.conv_empty(conv.stage), conv.phase ^ 1);
    const uint8_t* src = smem.b_fp4(pipe.stage);
    const uint32_t* codes = smem.codes(pipe.stage);
    uint8_t* dst = smem.b(conv.stage);
#pragma unroll 1
    for (int step = converter; step < BLOCK_N / 8; step += kNumConverterWarps) {
      const int r = 8 * step + row_in_step;
      const int code = int((codes[r] >> (8 * group)) & 0xFFu);
      const int base_code = base_code_of_row<kEpilogue>(base, r);
      const Fp4ShiftTable table = tables[fp4_table_index(code - base_code)];
      Fp4E4m3x8 e[4];
#pragma unroll
      for (int t = 0; t < 4; ++t)
        e[t] = fp4x8_to_e4m3x8(*reinterpret_cast<const uint32_t*>(src + r * 64 + 4 * fp4_slot(r, t, group)), table);
      uint8_t* row = dst + r * 128;
      *reinterpret_cast<uint4*>(row + ((2 * group) ^ (r % 8)) * 16) = make_uint4(e[0].lo, e[1].lo, e[2].lo, e[3].lo);
      *reinterpret_cast<uint4*>(row + ((2 * group + 1) ^ (r % 8)) * 16) =
          make_uint4(e[0].hi, e[1].hi, e[2].hi, e[3].hi);
    }
    ptx::fence_proxy_async_shared_cta();  // this thread's E4M3 stores -> visible to the WGMMA (async proxy)
    __syncwarp();
    if (lane == 0) {
      ptx::mbarrier_arrive(smem.full(conv.stage));
      ptx::mbarrier_arrive(smem.empty(pipe.stage));  // done reading the raw stage (FP4 tile, codes, base slot)
    }
    pipe.advance();
    conv.advance();
  }
}

}  // namespace symmoe::gemm::kernel
