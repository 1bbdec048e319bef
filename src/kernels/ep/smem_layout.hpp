// Dynamic shared memory of the dispatch kernel: the one place that knows its regions, offsets and sizes (the host
// reads num_bytes to launch, the kernel the pointers). In order, each region 16-byte aligned:
//   counters      [kNumWarps][R + E] int32   per warp: count_tokens' counts, then compute_bases' bases (notify.cuh)
//   route_chunks  [kNumWarps]                per warp: one RouteChunk, route_chunk_bytes() (notify.cuh)
//   bulk_pipes    [kNumWarps]                per warp: one BulkRowPipe's stages and barriers, bulk_pipe_bytes()
//   row_base      [R] int32                  first output row of this rank's tokens on each destination
//   receive metadata (RecvMeta, copy_epilogue.cuh), int32:
//     psum_rank   [R]                        inclusive prefix over sources of the rows received
//     start       [El]                       exclusive prefix of the aligned per-expert counts
//     unaligned   [El], aligned [El]         per-expert counts
//     expert_base [R][El]                    fresh dispatch: start[e] + rows of earlier sources for e
// NOTES: ~210 KB for V3 (R + E = 264): the bulk pipes take most; a layout of one CTA per SM.
#pragma once

#include <cstdint>

#include "kernels/ep/bulk_rows.cuh"
#include "kernels/ep/notify.cuh"
#include "kernels/ep/params.hpp"

namespace symmoe::ep {

struct DispatchSmemLayout {
  static constexpr uint64_t kAlign = 16;
  uint64_t base = 0;  // 16-byte aligned; 0 on the host (sizes only)
  int num_ranks = 0, num_experts = 0, num_local_experts = 0;

  __host__ __device__ constexpr DispatchSmemLayout(const layout::EpDims& d, uint64_t base_ = 0)
      : base(base_), num_ranks(d.num_ranks), num_experts(d.num_experts), num_local_experts(d.num_local_experts()) {}

  // Byte offsets (each region starts at the next multiple of kAlign).
  __host__ __device__ constexpr uint64_t counters_offset() const { return 0; }
  __host__ __device__ constexpr uint64_t route_chunks_offset() const {
    return align_up<uint64_t>(counters_offset() + uint64_t(kNumWarps) * (num_ranks + num_experts) * 4, kAlign);
  }
  __host__ __device__ constexpr uint64_t bulk_pipes_offset() const {
    return align_up<uint64_t>(route_chunks_offset() + uint64_t(kNumWarps) * route_chunk_bytes(), kAlign);
  }
  __host__ __device__ constexpr uint64_t row_base_offset() const {
    return align_up<uint64_t>(bulk_pipes_offset() + uint64_t(kNumWarps) * bulk_pipe_bytes(), kAlign);
  }
  __host__ __device__ constexpr uint64_t recv_offset() const {
    return align_up<uint64_t>(row_base_offset() + uint64_t(num_ranks) * 4, kAlign);
  }
  __host__ __device__ constexpr uint64_t num_recv_ints() const {
    return uint64_t(num_ranks) + 3ull * num_local_experts + uint64_t(num_ranks) * num_local_experts;
  }
  __host__ __device__ constexpr uint64_t num_bytes() const { return recv_offset() + num_recv_ints() * 4; }

  // Warp `warp`'s counter row [R + E], routing chunk and bulk pipe.
  __device__ int* counters(int warp) const {
    return reinterpret_cast<int*>(base + counters_offset()) + warp * (num_ranks + num_experts);
  }
  __device__ uint8_t* route_chunk(int warp) const {
    return reinterpret_cast<uint8_t*>(base + route_chunks_offset()) + uint64_t(warp) * route_chunk_bytes();
  }
  __device__ uint8_t* bulk_pipe(int warp) const {
    return reinterpret_cast<uint8_t*>(base + bulk_pipes_offset()) + uint64_t(warp) * bulk_pipe_bytes();
  }
  __device__ int* row_base() const { return reinterpret_cast<int*>(base + row_base_offset()); }
  __device__ int* recv_psum_rank() const { return reinterpret_cast<int*>(base + recv_offset()); }
  __device__ int* recv_start() const { return recv_psum_rank() + num_ranks; }
  __device__ int* recv_unaligned() const { return recv_start() + num_local_experts; }
  __device__ int* recv_aligned() const { return recv_unaligned() + num_local_experts; }
  __device__ int* recv_expert_base() const { return recv_aligned() + num_local_experts; }
};

}  // namespace symmoe::ep
