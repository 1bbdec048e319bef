// The combine arithmetic, shared by EP combine (kernels/ep/reduce_epilogue.cuh, and the reduce_local_experts
// partial of kernels/ep/combine.cuh) and the fused layer's combine (kernels/mega/combine.cuh). The fused layer is
// bitwise equal to the composed one only because both sum with these routines (docs/design.md §3.6):
//   out = bf16_rne( fp32 sum from 0.f of the biases (if any), then the rows in ascending top-k lane order )
// one 16-byte piece (8 bf16 channels) at a time. Every add is a plain fp32 add (no FMA), in the caller's order.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace symmoe::kernel {

// bf16 -> fp32 is exact: the 16 bits shifted into the high half.
__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits16) { return __uint_as_float(bits16 << 16); }
__device__ __forceinline__ uint32_t float_to_bf16_bits(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }

__device__ __forceinline__ void combine_zero8(float (&acc)[8]) {
#pragma unroll
  for (int q = 0; q < 8; ++q) acc[q] = 0.f;
}

// acc[0..8) += the 8 bf16 values of one 16-byte piece (int4 or uint4), channel 2j from the low half of word j.
template <typename Vec16>
__device__ __forceinline__ void combine_add8(float (&acc)[8], const Vec16& v) {
  const uint32_t w[4] = {uint32_t(v.x), uint32_t(v.y), uint32_t(v.z), uint32_t(v.w)};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    acc[2 * j] = acc[2 * j] + bf16_bits_to_float(w[j] & 0xffffu);
    acc[2 * j + 1] = acc[2 * j + 1] + bf16_bits_to_float(w[j] >> 16);
  }
}

// The 8 sums rounded once to bf16 (round to nearest even), packed as one 16-byte piece.
__device__ __forceinline__ uint4 combine_pack8(const float (&acc)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) w[j] = float_to_bf16_bits(acc[2 * j]) | (float_to_bf16_bits(acc[2 * j + 1]) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace symmoe::kernel
