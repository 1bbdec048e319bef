// One-time host transform of expert weights into the layouts the grouped GEMM kernels read.
//
// L1 (gate/up) weights, per expert: input data e4m3 [2I, K] with rows 0..I-1 gate and I..2I-1 up, block scales
// fp32 [2I/128, K/128] (Fp8BlockWeights layout). Output:
//   data   e4m3 [2I, K], rows interleaved in groups of 8: g0..7, u0..7, g8..15, u8..15, ... (interleaved row
//          16q + j is gate row 8q + j for j < 8, up row 8q + j - 8 otherwise);
//   scales fp32 [I/128, K/128, 2]: for the 256-row interleaved tile t (intermediate channels [128t, 128t + 128)),
//          K block kb: (gate scale block (t, kb), up scale block (I/128 + t, kb)) — the kernel reads both with one
//          8-byte load per K block.
// L2 weights are used as they are (data [H, I], scales [H/128, I/128]).
// Requirements: I % 128 == 0, K % 128 == 0 (symmoe::Error otherwise).
#pragma once

#include <cstdint>

#include "symmoe/common.hpp"

namespace symmoe::gemm {

// Host memory, num_experts experts back to back. out_data: E*2I*K bytes, out_scales: E*(I/128)*(K/128)*2 floats.
void transform_l1_weights(const uint8_t* data, const float* scales, int num_experts, int inter, int k,
                          uint8_t* out_data, float* out_scales);

// Inverse of the data permutation: interleaved row -> original row (gate rows 0..I-1, up rows I..2I-1).
// SYMMOE_HD: the synthetic-weight fill kernel (src/kernels/moe) writes the interleaved layout with it.
SYMMOE_HD int l1_original_row(int interleaved_row, int inter) {
  const int group = interleaved_row / 16, j = interleaved_row % 16;
  return j < 8 ? 8 * group + j : inter + 8 * group + (j - 8);
}

}  // namespace symmoe::gemm
