// Kernel arguments of EP dispatch and combine: plain structs filled by the host (src/ep/ep_buffer.cpp) and passed
// by value (__grid_constant__) to the kernels in src/kernels/ep/*.cu. No CUDA device code here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/comm/sym_buffer.cuh"
#include "kernels/common/input_error.hpp"
#include "symmoe/layout/ep.hpp"
#include "layout/ep_roles.hpp"
#include "symmoe/plan.hpp"
#include "symmoe/layout/sync.hpp"

namespace symmoe::ep {

// Warps per CTA of the dispatch and combine kernels: layout/ep_roles.hpp (shared with the planner).
// NOTES: register copies (combine sends, expand epilogue) keep kCopyVecs 16-byte vectors per lane in flight (8 KB
// per warp); dispatch moves its rows through per-warp bulk pipes (bulk_rows.cuh).
constexpr int kNumWarps = layout::EpDispatchRoles::kNumWarps;
constexpr int kCopyVecs = 16;
constexpr int kNumThreads = layout::EpDispatchRoles::kNumThreads;
constexpr int kCombineWarps = layout::EpCombineRoles::kNumWarps;

// A bad routing entry found on the device while counting (kernels/common/input_error.hpp).
using symmoe::kernel::input_error_key;
using symmoe::kernel::InputError;
using symmoe::kernel::InputErrorKind;

// Device arrays of one EpHandle (see symmoe/ep.hpp for shapes).
struct HandleArrays {
  int32_t* num_tokens_per_rank;
  int32_t* num_tokens_per_expert;
  int32_t* dst_buffer_slot_idx;
  int64_t* topk_idx;
  int32_t* psum_num_recv_tokens_per_rank;
  int32_t* num_unaligned_recv_tokens_per_expert;
  int32_t* psum_num_recv_tokens_per_expert;
  int32_t* num_recv_tokens_per_expert;  // aligned
  int32_t* recv_src_metadata;
  int32_t* device_counts;  // [0] num_recv_tokens, [1] num_expanded_tokens
};

struct DispatchParams {
  comm::SymBuffer sym;      // the EP buffer
  layout::EpLayout layout;  // at this rank's base
  layout::SyncArea sync;    // layout.get_sync_area()
  layout::WaitContext wait;
  int rank, num_tokens, x_row_bytes, sf_row_bytes;
  const uint8_t* x;
  const uint8_t* x_sf;
  const int64_t* topk_idx;
  const float* topk_weights;
  bool cached, expand, zero_padding;
  int expert_alignment;
  HandleArrays handle;
  uint8_t* recv_x;  // expand outputs (non-expand rows are the buffer's recv_x / recv_scales regions)
  uint8_t* recv_sf;
  int64_t* recv_topk_idx;
  float* recv_topk_weights;
  int32_t* warp_counts;           // [num_ctas * kNumWarps][R + E] workspace
  unsigned long long* error_key;  // min over (token << 32 | lane << 8 | kind); all ones = none
  InputError* error;              // host-mapped
};

struct CombineParams {
  comm::SymBuffer sym;
  layout::EpLayout layout;
  layout::SyncArea sync;
  layout::WaitContext wait;
  int rank, num_tokens;
  bool expand, reduce_local_experts;
  const uint16_t* x;
  const float* topk_weights;
  const uint16_t* bias_0;
  const uint16_t* bias_1;
  HandleArrays handle;
  uint16_t* combined_x;
  float* combined_topk_weights;
};

// Dynamic shared memory of the dispatch kernel (per-warp counters and routing chunks, receive metadata).
size_t dispatch_smem_bytes(const layout::EpDims& dims);

void launch_dispatch(const DispatchParams& params, int num_ctas, cudaStream_t stream);
void launch_combine(const CombineParams& params, int num_ctas, cudaStream_t stream);

}  // namespace symmoe::ep
