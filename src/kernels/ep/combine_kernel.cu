// The combine kernel: rank barrier -> send rows back (combine.cuh) -> rank barrier -> reduce epilogue.
// The first barrier guarantees every source finished its previous reduce before its combine_recv is overwritten.
// NOTES: measured (bench ep, nvidia-h200-x2, 2026-11-29, V3 BF16, 2 ranks): 8192 tokens/rank 851 us with 24 SMs
// (NVLink 138 GB/s = 38% of ceiling), 732 us with 32; 128 tokens/rank ~24 us. The reduce epilogue runs after all
// sends (HBM re-read of K or R rows per token); overlapping it with the sends is the main missing piece.
#include "kernels/comm/barrier.cuh"
#include "kernels/ep/reduce_epilogue.cuh"
#include "symmoe/cuda_check.hpp"

namespace symmoe::ep {
namespace {

constexpr size_t kBarrierBytes = kNumWarps * 2 * 8;

__global__ void __launch_bounds__(kNumThreads, 1) combine_kernel(const __grid_constant__ CombineParams p) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ int lists[kNumWarps][32];
  const int warp = warp_id(), g = blockIdx.x * kNumWarps + warp, num_warps = gridDim.x * kNumWarps;
  int* list = lists[warp];
  const uint32_t row_bytes = uint32_t(p.layout.dims().hidden) * 2;
  Stager st;
  st.init(smem + kBarrierBytes + size_t(warp) * p.num_buffers * row_bytes, reinterpret_cast<uint64_t*>(smem) + warp * 2,
          row_bytes, p.num_buffers);
  ptx::fence_mbarrier_init_cluster();
  __syncthreads();
  if (!comm::rank_barrier(p.sym, p.sync, p.wait)) return;
  const int num_recv = p.handle.device_counts[0];
  for (int i = g; i < num_recv; i += num_warps) combine_send_token(p, st, i, list);
  drain_bulk_stores();
  if (!comm::rank_barrier(p.sym, p.sync, p.wait)) return;
  for (int t = g; t < p.num_tokens; t += num_warps) reduce_token(p, t, list);
}

}  // namespace

size_t combine_smem_bytes(int hidden, int num_buffers) {
  return kBarrierBytes + size_t(kNumWarps) * num_buffers * hidden * 2;
}

int combine_num_buffers(int hidden) {
  int max_smem = 0, device = 0;
  SYMMOE_CUDA_CHECK(cudaGetDevice(&device));
  SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const size_t static_bytes = sizeof(int) * kNumWarps * 32;
  for (int b = 2; b >= 1; --b)
    if (combine_smem_bytes(hidden, b) + static_bytes <= size_t(max_smem)) return b;
  return 0;
}

void launch_combine(const CombineParams& p, int num_ctas, cudaStream_t stream) {
  const size_t smem = combine_smem_bytes(p.layout.dims().hidden, p.num_buffers);
  // Raise the kernel's shared-memory limit once per device (cheap host path; nothing to do inside graph capture).
  static int configured[64] = {};
  int device = 0;
  SYMMOE_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= 64 || configured[device] < int(smem)) {
    SYMMOE_CUDA_CHECK(cudaFuncSetAttribute(combine_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    if (device < 64) configured[device] = int(smem);
  }
  combine_kernel<<<num_ctas, kNumThreads, smem, stream>>>(p);
  SYMMOE_CUDA_CHECK_LAUNCH("ep combine_kernel");
}

}  // namespace symmoe::ep
