// Host block quantisers: walk the blocks, take each block's amax, apply the one scale rule and the one cast from
// formats.hpp. The GPU quantiser (src/kernels/formats/quantize.cu) calls the same per-element functions, so the two
// agree bitwise (tests/gpu/test_formats.cu).
#include "symmoe/quant.hpp"

#include <algorithm>

#include "symmoe/common.hpp"

namespace symmoe {
namespace {

void check_matrix(const void* ptr, int num_rows, int num_cols, const char* fn) {
  SYMMOE_CHECK(num_rows >= 0, "formats", fn, ": num_rows must be >= 0, got ", num_rows);
  SYMMOE_CHECK(num_cols >= 0, "formats", fn, ": num_cols must be >= 0, got ", num_cols);
  SYMMOE_CHECK(ptr != nullptr || size_t(num_rows) * size_t(num_cols) == 0, "formats", fn,
               ": input pointer is null for a ", num_rows, " x ", num_cols, " matrix");
}

// amax over x[row0..row1) x [col0..col1) of a row-major matrix with leading dimension ld.
float block_amax(const float* x, size_t ld, int row0, int row1, int col0, int col1) {
  float amax = 0.0f;
  for (int r = row0; r < row1; ++r)
    for (int c = col0; c < col1; ++c) amax = fmt::amax_update(amax, x[size_t(r) * ld + c]);
  return amax;
}

}  // namespace

Fp8Activations quantize_activations(const float* x, int num_rows, int num_cols, int block, fmt::ScaleFormat format) {
  constexpr const char* kFn = "quantize_activations";
  SYMMOE_CHECK(block == 128 || block == 32, "formats", kFn, ": block must be 32 or 128, got ", block);
  check_matrix(x, num_rows, num_cols, kFn);
  SYMMOE_CHECK(num_cols % block == 0, "formats", kFn, ": num_cols must be a multiple of block ", block, ", got ",
               num_cols);
  Fp8Activations out;
  out.num_rows = num_rows;
  out.num_cols = num_cols;
  out.block = block;
  const int num_blocks = num_cols / block;
  out.data.resize(size_t(num_rows) * num_cols);
  out.scales.resize(size_t(num_rows) * num_blocks);
  for (int r = 0; r < num_rows; ++r) {
    for (int b = 0; b < num_blocks; ++b) {
      const int c0 = b * block;
      const float scale = fmt::scale_for_amax(block_amax(x, num_cols, r, r + 1, c0, c0 + block), fmt::kE4M3Max, format);
      out.scales[size_t(r) * num_blocks + b] = scale;
      const float* src = x + size_t(r) * num_cols + c0;
      uint8_t* dst = out.data.data() + size_t(r) * num_cols + c0;
      for (int c = 0; c < block; ++c) dst[c] = fmt::quantize_e4m3(src[c], scale, format);
    }
  }
  return out;
}

Fp8BlockWeights quantize_weights_128x128(const float* w, int num_rows, int num_cols) {
  return quantize_weights_128x128(w, num_rows, num_cols, fmt::ScaleFormat::kFp32);
}

Fp8BlockWeights quantize_weights_128x128(const float* w, int num_rows, int num_cols, fmt::ScaleFormat format) {
  check_matrix(w, num_rows, num_cols, "quantize_weights_128x128");
  Fp8BlockWeights out;
  out.num_rows = num_rows;
  out.num_cols = num_cols;
  const int num_block_rows = (num_rows + 127) / 128, num_block_cols = out.num_scale_cols();
  out.data.resize(size_t(num_rows) * num_cols);
  out.scales.resize(size_t(num_block_rows) * num_block_cols);
  for (int br = 0; br < num_block_rows; ++br) {
    const int r0 = br * 128, r1 = std::min(r0 + 128, num_rows);
    for (int bc = 0; bc < num_block_cols; ++bc) {
      const int c0 = bc * 128, c1 = std::min(c0 + 128, num_cols);
      const float scale = fmt::scale_for_amax(block_amax(w, num_cols, r0, r1, c0, c1), fmt::kE4M3Max, format);
      out.scales[size_t(br) * num_block_cols + bc] = scale;
      for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; ++c) {
          const size_t i = size_t(r) * num_cols + c;
          out.data[i] = fmt::quantize_e4m3(w[i], scale, format);
        }
    }
  }
  return out;
}

Fp4Weights quantize_weights_fp4(const float* w, int num_rows, int num_cols) {
  constexpr const char* kFn = "quantize_weights_fp4";
  check_matrix(w, num_rows, num_cols, kFn);
  SYMMOE_CHECK(num_cols % 32 == 0, "formats", kFn, ": num_cols must be a multiple of 32, got ", num_cols);
  Fp4Weights out;
  out.num_rows = num_rows;
  out.num_cols = num_cols;
  const int num_blocks = num_cols / 32;
  out.data.resize(size_t(num_rows) * num_cols / 2);
  out.scales_ue8m0.resize(size_t(num_rows) * num_blocks);
  for (int r = 0; r < num_rows; ++r) {
    for (int b = 0; b < num_blocks; ++b) {
      const int c0 = b * 32;
      const float scale =
          fmt::scale_for_amax(block_amax(w, num_cols, r, r + 1, c0, c0 + 32), fmt::kE2M1Max, fmt::ScaleFormat::kUe8m0);
      out.scales_ue8m0[size_t(r) * num_blocks + b] = fmt::ue8m0_from_scale(scale);
      const float inv_scale = 1.0f / scale;  // exact: scale is a power of two
      const float* src = w + size_t(r) * num_cols + c0;
      uint8_t* dst = out.data.data() + (size_t(r) * num_cols + c0) / 2;
      for (int c = 0; c < 32; c += 2)
        dst[c / 2] = fmt::pack_e2m1x2(fmt::quantize_e2m1_pow2(src[c], inv_scale),
                                      fmt::quantize_e2m1_pow2(src[c + 1], inv_scale));
    }
  }
  return out;
}

}  // namespace symmoe
