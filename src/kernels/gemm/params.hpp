// Kernel-side parameters of the SM90 FP8 grouped GEMM, shared by the host launcher (src/gemm) and the kernel
// roles (src/kernels/gemm/*.cuh). Plain struct: the host fills it, the kernel receives it by value.
//
// Row addressing (one truth for both layouts): expert e owns global rows [row_begin(e), row_begin(e) + rows(e)):
//   contiguous: row_begin = segment_starts[e]; rows = num_valid_rows ? num_valid_rows[e] : segment length
//   masked:     row_begin = e * max_m;         rows = min(masked_m[e], max_m)
// A, its scales and D are all indexed by global row, so the masked layout [E, max_m, K] is the contiguous one
// with fixed segments.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "plan/gemm_kernels.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::gemm::kernel {

// The planner's epilogue enum (plan::kGemmKernels lists the compiled kernels): one truth.
using EpilogueKind = plan::GemmEpilogue;

// A TMA box must start 16-byte aligned in its inner dimension (an unaligned start faults with "illegal
// instruction"), and a tile's A scales start at any row. So the producer loads the scales from the row rounded
// down to a multiple of 4 (floats), BLOCK_M + kSfaBoxPad of them, and the math warps read at row % 4.
constexpr int kSfaBoxPad = plan::kGemmSfaBoxPad;

struct GemmParams {
  int num_experts = 0, n = 0, k = 0;
  int num_rows_total = 0;  // rows of A / D (masked: E * max_m)
  // Row ranges (see above): masked when max_m > 0.
  const int32_t* segment_starts = nullptr;  // [E + 1] contiguous
  const int32_t* num_valid_rows = nullptr;  // [E]; contiguous: optional, masked: the per-expert count
  int max_m = 0;
  // B scales. kBf16: fp32 [E, n/128, k/128]. kSwigluFp8: fp32 pairs [E, n/256, k/128, 2] = (gate, up) block
  // scales of the interleaved 256-column tile (weight_transform.hpp).
  const float* sfb = nullptr;
  // kBf16 output: bf16 [num_rows_total, n].
  uint16_t* d = nullptr;
  // kSwigluFp8 output: e4m3 [num_rows_total, n/2], UE8M0-valued fp32 scales [n/256, out_scale_stride] (K-block
  // major, the A-scale layout of the next GEMM); row_weights fp32 [num_rows_total]; clamp <= 0: none.
  uint8_t* out = nullptr;
  float* out_scales = nullptr;
  int out_scale_stride = 0;
  const float* row_weights = nullptr;
  float clamp = 0.f;
};

}  // namespace symmoe::gemm::kernel
