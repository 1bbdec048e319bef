// GPU fill of synthetic expert weights (include/symmoe/moe_weights.hpp defines the values): W1 written directly in
// the transformed (gate/up interleaved) layout the L1 GEMM reads, W2 as is, block scales alongside.
// NOTES: one 32-bit store of 4 codes per thread and step; ~25M codes per flash expert, a whole flash rank
// (El = 128: 3.2 GB) takes tens of ms, against minutes to generate and upload on the host.
#include "symmoe/cuda_check.hpp"
#include "symmoe/moe_weights.hpp"
#include "symmoe/weight_transform.hpp"

namespace symmoe {
namespace {

struct FillParams {
  int hidden, inter, first_expert, num_experts;
  uint64_t seed;
  float w1_fan_in_scale, w2_fan_in_scale;
  uint32_t* w1;  // [El, 2I, H/4] packed codes
  float* w1_scales;
  uint32_t* w2;  // [El, H, I/4]
  float* w2_scales;
};

__global__ void __launch_bounds__(256) fill_codes_kernel(const FillParams p) {
  const int H = p.hidden, I = p.inter;
  const size_t w1_words = size_t(2) * I * (H / 4), w2_words = size_t(H) * (I / 4);
  const size_t per_expert = w1_words + w2_words, total = per_expert * p.num_experts;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const int le = int(i / per_expert);
    const size_t j = i - size_t(le) * per_expert;
    const int expert = p.first_expert + le;
    uint32_t word = 0;
    if (j < w1_words) {
      const int row = int(j / (H / 4)), col = int(j % (H / 4)) * 4;
      const uint64_t key = synthetic::stream_key(p.seed, expert, synthetic::kW1);
      const int orig = gemm::l1_original_row(row, I);
      for (int b = 0; b < 4; ++b) word |= uint32_t(synthetic::weight_code(key, orig, col + b)) << (8 * b);
      p.w1[size_t(le) * w1_words + j] = word;
    } else {
      const size_t k = j - w1_words;
      const int row = int(k / (I / 4)), col = int(k % (I / 4)) * 4;
      const uint64_t key = synthetic::stream_key(p.seed, expert, synthetic::kW2);
      for (int b = 0; b < 4; ++b) word |= uint32_t(synthetic::weight_code(key, row, col + b)) << (8 * b);
      p.w2[size_t(le) * w2_words + k] = word;
    }
  }
}

// Transformed W1 scales [El, I/128, H/128, 2] = (gate block (t, kb), up block (I/128 + t, kb)); W2 [El, H/128, I/128].
__global__ void __launch_bounds__(256) fill_scales_kernel(const FillParams p) {
  const int hb = p.hidden / 128, ib = p.inter / 128;
  const int w1_n = ib * hb * 2, w2_n = hb * ib, per_expert = w1_n + w2_n;
  const int total = per_expert * p.num_experts;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int le = i / per_expert, j = i % per_expert, expert = p.first_expert + le;
    if (j < w1_n) {
      const int t = j / (hb * 2), kb = (j / 2) % hb, up = j % 2;
      const uint64_t key = synthetic::stream_key(p.seed, expert, synthetic::kW1 + 2);
      p.w1_scales[size_t(le) * w1_n + j] = synthetic::block_scale(key, up * ib + t, kb, p.w1_fan_in_scale);
    } else {
      const int k = j - w1_n, rb = k / ib, cb = k % ib;
      const uint64_t key = synthetic::stream_key(p.seed, expert, synthetic::kW2 + 2);
      p.w2_scales[size_t(le) * w2_n + k] = synthetic::block_scale(key, rb, cb, p.w2_fan_in_scale);
    }
  }
}

}  // namespace

void launch_synthetic_weights(const MoeShape& shape, int first_expert, int num_experts, uint64_t seed, uint8_t* w1,
                              float* w1_scales, uint8_t* w2, float* w2_scales, cudaStream_t stream) {
  SYMMOE_CHECK(shape.hidden % 128 == 0 && shape.intermediate % 128 == 0, "moe", "synthetic weights need H and I ",
               "multiples of 128, got ", shape.to_string());
  if (num_experts <= 0) return;
  FillParams p{shape.hidden,
               shape.intermediate,
               first_expert,
               num_experts,
               seed,
               synthetic::fan_in_scale(shape.hidden),
               synthetic::fan_in_scale(shape.intermediate),
               reinterpret_cast<uint32_t*>(w1),
               w1_scales,
               reinterpret_cast<uint32_t*>(w2),
               w2_scales};
  int device = 0, sms = 0;
  SYMMOE_CUDA_CHECK(cudaGetDevice(&device));
  SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  fill_codes_kernel<<<sms * 8, 256, 0, stream>>>(p);
  SYMMOE_CUDA_CHECK_LAUNCH("moe fill_codes_kernel");
  fill_scales_kernel<<<sms, 256, 0, stream>>>(p);
  SYMMOE_CUDA_CHECK_LAUNCH("moe fill_scales_kernel");
}

}  // namespace symmoe
