// Block quantisation on the host: activations per token per `block` channels, weights per 128x128 block,
// FP4 weights with UE8M0 per-32 scales. The per-element and per-block formulas (scale from amax, cast) live
// in formats.hpp and are shared with the kernels; this file only walks the blocks.
//
// Layouts (row major everywhere):
//   Fp8Activations: data e4m3 [num_rows, num_cols], scales fp32 [num_rows, num_cols / block]
//   Fp8BlockWeights: data e4m3 [num_rows (N), num_cols (K)], scales fp32 [ceil(N/128), ceil(K/128)]
//   Fp4Weights: data [num_rows, num_cols / 2], column 2j in the low nibble, 2j+1 in the high nibble;
//               scales UE8M0 [num_rows, num_cols / 32]
#pragma once

#include <cstdint>
#include <vector>

#include "symmoe/formats.hpp"

namespace symmoe {

struct Fp8Activations {
  int num_rows = 0, num_cols = 0, block = 128;
  std::vector<uint8_t> data;
  std::vector<float> scales;
  float scale(int row, int col) const { return scales[size_t(row) * (num_cols / block) + col / block]; }
  float dequant(int row, int col) const {
    return fmt::e4m3_to_float(data[size_t(row) * num_cols + col]) * scale(row, col);
  }
};

struct Fp8BlockWeights {
  int num_rows = 0, num_cols = 0;  // N, K
  std::vector<uint8_t> data;
  std::vector<float> scales;
  int num_scale_cols() const { return (num_cols + 127) / 128; }
  float scale(int row, int col) const { return scales[size_t(row / 128) * num_scale_cols() + col / 128]; }
  float dequant(int row, int col) const {
    return fmt::e4m3_to_float(data[size_t(row) * num_cols + col]) * scale(row, col);
  }
};

struct Fp4Weights {
  int num_rows = 0, num_cols = 0;
  std::vector<uint8_t> data;
  std::vector<uint8_t> scales_ue8m0;
  float dequant(int row, int col) const {
    const uint8_t byte = data[(size_t(row) * num_cols + col) / 2];
    const uint8_t nibble = (col & 1) ? (byte >> 4) : (byte & 0xF);
    return fmt::e2m1_to_float(nibble) * fmt::ue8m0_to_float(scales_ue8m0[size_t(row) * (num_cols / 32) + col / 32]);
  }
};

// block must be 128 or 32 and divide num_cols. Throws symmoe::Error otherwise. kUe8m0 stores the power-of-two
// scale as its fp32 value (fmt::ue8m0_from_scale gives the byte).
Fp8Activations quantize_activations(const float* x, int num_rows, int num_cols, int block, fmt::ScaleFormat format);
// Any N, K (partial edge blocks get their own scale, from the amax of the elements they hold).
// Scales are fp32 amax / 448 by default: DeepGEMM's SM90 FP8 GEMM takes fp32 weight-block scales (UE8M0 packing is
// its SM100 path), and fp32 keeps up to 1 more bit of the E4M3 range. The overload with a ScaleFormat gives
// UE8M0-valued (power-of-two) fp32 scales for callers that fold scales into exponents.
Fp8BlockWeights quantize_weights_128x128(const float* w, int num_rows, int num_cols);
Fp8BlockWeights quantize_weights_128x128(const float* w, int num_rows, int num_cols, fmt::ScaleFormat format);
// num_cols must be a multiple of 32. Scale of each 32-block: 2^ceil(log2(max(amax, kAmaxFloor) / 6)).
Fp4Weights quantize_weights_fp4(const float* w, int num_rows, int num_cols);

}  // namespace symmoe
