// Host interface of the expand glue kernel (src/kernels/moe/expand_glue.cu): EP expand metadata and scales ->
// the grouped GEMM's segment starts and K-block-major activation scales.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "symmoe/common.hpp"

namespace symmoe::moe {

struct ExpandGlueParams {
  int num_local_experts = 0;
  int num_k_blocks = 0;                           // H / 128
  const int32_t* psum_per_expert = nullptr;       // EpHandle::psum_num_recv_tokens_per_expert [El]
  const int32_t* unaligned_per_expert = nullptr;  // EpHandle::num_unaligned_recv_tokens_per_expert [El]
  const int32_t* device_counts = nullptr;         // EpHandle::device_counts ([1] = num_expanded_tokens)
  const float* recv_scales = nullptr;             // [rows, H/128] fp32 (EP recv_scales, kFp32Per128)
  int32_t* segment_starts = nullptr;              // [El + 1]
  float* sfa = nullptr;                           // [H/128, sfa_stride]
  int sfa_stride = 0;
};

// max_rows: the row capacity (sizes the grid; the kernel stops at the device count).
void launch_expand_glue(const ExpandGlueParams& p, int max_rows, cudaStream_t stream);

}  // namespace symmoe::moe
