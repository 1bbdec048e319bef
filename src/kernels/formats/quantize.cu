// Per-token block quantisation of activations to FP8 E4M3 (the standalone kernel; the fused kernels quantise in
// their epilogues with the same formats.hpp calls).
//
// Work split: one warp per (row, 128-channel chunk); lane l holds channels 4l..4l+3 (one 16-byte fp32 or 8-byte bf16
// load). A block of 128 is the whole warp (xor-shuffle over 32 lanes); a block of 32 is 8 lanes (xor 1, 2, 4).
// NOTES: max is exact and NaN elements are skipped before the shuffle, so the warp amax equals the host's
//        sequential amax bit for bit, whatever the reduction order.
// NOTES: memory bound: reads 4 (fp32) or 2 (bf16) bytes and writes 1 byte (+4 per block) per element.
#include <cuda_bf16.h>

#include <algorithm>

#include "symmoe/common.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/quantize_gpu.hpp"

namespace symmoe {
namespace {

constexpr int kChunk = 128;  // channels per warp
constexpr int kValuesPerLane = 4;
constexpr int kWarpsPerCta = 8;

SYMMOE_DEVICE void load4(const float* p, float v[4]) {
  const float4 f = *reinterpret_cast<const float4*>(p);
  v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
}
SYMMOE_DEVICE void load4(const __nv_bfloat16* p, float v[4]) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  v[0] = fmt::bf16_to_float(uint16_t(u.x & 0xFFFF)), v[1] = fmt::bf16_to_float(uint16_t(u.x >> 16));
  v[2] = fmt::bf16_to_float(uint16_t(u.y & 0xFFFF)), v[3] = fmt::bf16_to_float(uint16_t(u.y >> 16));
}

template <typename T>
__global__ void __launch_bounds__(kWarpsPerCta * 32)
    quantize_activations_kernel(const T* __restrict__ x, int num_rows, int num_cols, int block, fmt::ScaleFormat format,
                                uint8_t* __restrict__ out, float* __restrict__ scales) {
  const int lane = threadIdx.x % 32;
  const int lanes_per_block = block / kValuesPerLane;  // 32 or 8
  const int chunks_per_row = ceil_div(num_cols, kChunk);
  const long long num_chunks = (long long)num_rows * chunks_per_row;
  const long long warp_stride = (long long)gridDim.x * kWarpsPerCta;
  // The loop bound is warp-uniform, so every shuffle below has all 32 lanes.
  for (long long chunk = (long long)blockIdx.x * kWarpsPerCta + threadIdx.x / 32; chunk < num_chunks;
       chunk += warp_stride) {
    const int row = int(chunk / chunks_per_row);
    const int col = int(chunk % chunks_per_row) * kChunk + lane * kValuesPerLane;
    // Only with block 32 can a chunk be partial; its missing 32-blocks are whole 8-lane groups.
    const bool active = col < num_cols;
    const size_t offset = size_t(row) * num_cols + col;
    float v[kValuesPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (active) load4(x + offset, v);
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) amax = fmt::amax_update(amax, v[i]);
    for (int mask = 1; mask < lanes_per_block; mask <<= 1) {
      const float other = __shfl_xor_sync(0xFFFFFFFFu, amax, mask);
      amax = other > amax ? other : amax;
    }
    if (!active) continue;
    const float scale = fmt::scale_for_amax(amax, fmt::kE4M3Max, format);
    if (lane % lanes_per_block == 0) scales[size_t(row) * (num_cols / block) + col / block] = scale;
    uint32_t packed = 0;
    if (format == fmt::ScaleFormat::kFp32) {
#pragma unroll
      for (int i = 0; i < kValuesPerLane; ++i) packed |= uint32_t(fmt::float_to_e4m3(v[i] / scale)) << (8 * i);
    } else {
      const float inv_scale = 1.0f / scale;  // exact: power of two
#pragma unroll
      for (int i = 0; i < kValuesPerLane; ++i) packed |= uint32_t(fmt::quantize_e4m3_pow2(v[i], inv_scale)) << (8 * i);
    }
    *reinterpret_cast<uint32_t*>(out + offset) = packed;
  }
}

template <typename T>
void launch(const T* x, int num_rows, int num_cols, int block, fmt::ScaleFormat format, uint8_t* out, float* scales,
            cudaStream_t stream) {
  constexpr const char* kFn = "quantize_activations_gpu";
  SYMMOE_CHECK(block == 128 || block == 32, "formats", kFn, ": block must be 32 or 128, got ", block);
  SYMMOE_CHECK(num_rows >= 0, "formats", kFn, ": num_rows must be >= 0, got ", num_rows);
  SYMMOE_CHECK(num_cols >= 0 && num_cols % block == 0, "formats", kFn, ": num_cols must be a multiple of block ", block,
               ", got ", num_cols);
  SYMMOE_CHECK(format == fmt::ScaleFormat::kFp32 || format == fmt::ScaleFormat::kUe8m0, "formats", kFn,
               ": unknown scale format ", int(format));
  if (num_rows == 0 || num_cols == 0) return;
  constexpr size_t kXAlign = sizeof(T) * kValuesPerLane;
  SYMMOE_CHECK(x != nullptr && reinterpret_cast<uintptr_t>(x) % kXAlign == 0, "formats", kFn,
               ": x must be a non-null device pointer aligned to ", kXAlign, " bytes, got ", (const void*)x);
  SYMMOE_CHECK(out != nullptr && reinterpret_cast<uintptr_t>(out) % 4 == 0, "formats", kFn,
               ": out must be a non-null device pointer aligned to 4 bytes, got ", (const void*)out);
  SYMMOE_CHECK(scales != nullptr && reinterpret_cast<uintptr_t>(scales) % 4 == 0, "formats", kFn,
               ": scales must be a non-null device pointer aligned to 4 bytes, got ", (const void*)scales);
  const long long num_chunks = (long long)num_rows * ceil_div(num_cols, kChunk);
  // Grid-stride loop: cap the grid at 2^20 CTAs (far more than fit at once on any GPU).
  const long long num_ctas = std::min<long long>(ceil_div<long long>(num_chunks, kWarpsPerCta), 1 << 20);
  quantize_activations_kernel<T>
      <<<unsigned(num_ctas), kWarpsPerCta * 32, 0, stream>>>(x, num_rows, num_cols, block, format, out, scales);
  SYMMOE_CUDA_CHECK_LAUNCH("quantize_activations_kernel");
}

}  // namespace

void quantize_activations_gpu(const float* x, int num_rows, int num_cols, int block, fmt::ScaleFormat format,
                              uint8_t* out, float* scales, cudaStream_t stream) {
  launch(x, num_rows, num_cols, block, format, out, scales, stream);
}

void quantize_activations_gpu(const __nv_bfloat16* x, int num_rows, int num_cols, int block, fmt::ScaleFormat format,
                              uint8_t* out, float* scales, cudaStream_t stream) {
  launch(x, num_rows, num_cols, block, format, out, scales, stream);
}

}  // namespace symmoe
