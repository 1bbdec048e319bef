// Glue between EP dispatch (expand) and the grouped GEMM, one small kernel per rank and call:
//   segment_starts[e] = psum_num_recv_tokens_per_expert[e] - num_unaligned[e]  (expand: psum = start + unaligned),
//   segment_starts[El] = num_expanded_tokens (device count);
//   sfa[kb * stride + r] = recv_scales[r * kb_count + kb] for r < num_expanded_tokens (row-major -> K-block-major).
// Everything is read from device memory: no host sync, CUDA-graph capturable.
// NOTES: tiny next to the GEMMs: 4 bytes per (row, 128 channels), e.g. 12k rows of flash = 1.5 MB (~2 us).
// Chosen over an EP option that writes K-block-major scales: EP's receive layout stays one format for every caller.
#include "moe/expand_glue.hpp"
#include "symmoe/cuda_check.hpp"

namespace symmoe::moe {
namespace {

__global__ void __launch_bounds__(256) expand_glue_kernel(const ExpandGlueParams p) {
  const int num_rows = p.device_counts[1];
  if (blockIdx.x == 0)
    for (int e = threadIdx.x; e <= p.num_local_experts; e += blockDim.x)
      p.segment_starts[e] = e < p.num_local_experts ? p.psum_per_expert[e] - p.unaligned_per_expert[e] : num_rows;
  // Index over the OUTPUT (coalesced stores); the strided loads of one row's scales share cache lines.
  const size_t total = size_t(num_rows) * p.num_k_blocks;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const int kb = int(i / num_rows), r = int(i % num_rows);
    p.sfa[size_t(kb) * p.sfa_stride + r] = p.recv_scales[size_t(r) * p.num_k_blocks + kb];
  }
}

}  // namespace

void launch_expand_glue(const ExpandGlueParams& p, int max_rows, cudaStream_t stream) {
  const int blocks =
      int(std::min<size_t>(std::max<size_t>(ceil_div<size_t>(size_t(max_rows) * p.num_k_blocks, 256), 1), 264));
  expand_glue_kernel<<<blocks, 256, 0, stream>>>(p);
  SYMMOE_CUDA_CHECK_LAUNCH("moe expand_glue_kernel");
}

}  // namespace symmoe::moe
