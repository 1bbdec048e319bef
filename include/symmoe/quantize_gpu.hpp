// GPU activation quantiser: FP8 E4M3 with one scale per token per `block` channels, bitwise identical to the host
// symmoe::quantize_activations (quant.hpp) because both call the same formats.hpp casts and scale rule.
//
// Contract (device pointers, row major, asynchronous on `stream`):
//   x       [num_rows, num_cols] fp32 (16-byte aligned) or bf16 (8-byte aligned)
//   out     [num_rows, num_cols] e4m3 codes (4-byte aligned)
//   scales  [num_rows, num_cols / block] fp32; for kUe8m0 the power-of-two value (fmt::ue8m0_from_scale gives the byte)
// block must be 32 or 128 and divide num_cols. Arguments are checked (symmoe::Error naming the argument) before
// anything is launched or written.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "symmoe/formats.hpp"

namespace symmoe {

void quantize_activations_gpu(const float* x, int num_rows, int num_cols, int block, fmt::ScaleFormat format,
                              uint8_t* out, float* scales, cudaStream_t stream);
void quantize_activations_gpu(const __nv_bfloat16* x, int num_rows, int num_cols, int block, fmt::ScaleFormat format,
                              uint8_t* out, float* scales, cudaStream_t stream);

}  // namespace symmoe
