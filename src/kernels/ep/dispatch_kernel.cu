// The dispatch kernel: wires notify (count + bases), dispatch (push) and the copy epilogue of one rank.
//   fresh:  count -> rank barrier -> bases + count exchange + push -> rank barrier -> copy epilogue
//   cached:          rank barrier -> push (handle's slots)          -> rank barrier -> copy epilogue
// The first barrier also guarantees every peer finished reading its receive region in the previous EP call, so
// each call's writes into peer memory are safe without counters to reset (CUDA graphs replay freely).
// NOTES: all CTAs must be co-resident (grid syncs): the host clamps the grid to the rank's SM share.
// Measured (bench ep, nvidia-h200-x2, 2026-11-29, V3 FP8, 2 ranks): 8192 tokens/rank 556 us with 24 SMs (NVLink
// 110 GB/s per direction = 30% of the 363 GB/s peer-copy ceiling), 489 us with 32; 128 tokens/rank ~30 us. Time
// scales with 1/SMs, so the per-warp chain (serial slot walk: topk load -> bulk load -> bulk store, 2 buffers) and
// the copy epilogue that runs AFTER all pushes dominate, not NVLink. Next steps: overlap the copy epilogue with the
// pushes (per-source arrival counters), prefetch the next token's routing, more records in flight per warp.
#include "kernels/comm/barrier.cuh"
#include "kernels/ep/copy_epilogue.cuh"
#include "kernels/ep/dispatch.cuh"
#include "kernels/ep/notify.cuh"
#include "symmoe/cuda_check.hpp"

namespace symmoe::ep {
namespace {

constexpr uint32_t kStageAlign = 128;

__host__ __device__ constexpr size_t counters_bytes(const layout::EpDims& d) {
  return align_up<size_t>(size_t(kNumWarps) * (d.num_ranks + d.num_experts) * 4, 16);
}
__host__ __device__ constexpr size_t barriers_bytes() { return size_t(kNumWarps) * 2 * 8; }

__global__ void __launch_bounds__(kNumThreads, 1) dispatch_kernel(const __grid_constant__ DispatchParams p) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const auto& dims = p.layout.dims();
  const int n = dims.num_ranks + dims.num_experts;
  const int warp = warp_id(), g = blockIdx.x * kNumWarps + warp, num_warps = gridDim.x * kNumWarps;
  int* counters = reinterpret_cast<int*>(smem);
  auto* bars = reinterpret_cast<uint64_t*>(smem + counters_bytes(dims));
  uint8_t* stage = smem + align_up<size_t>(counters_bytes(dims) + barriers_bytes(), kStageAlign);
  const uint32_t stride = p.layout.token_record().stride;

  Stager st;
  st.init(stage + size_t(warp) * p.num_buffers * stride, bars + warp * 2, stride, p.num_buffers);
  ptx::fence_mbarrier_init_cluster();
  __syncthreads();

  int begin, end;
  warp_token_range(p.num_tokens, g, num_warps, &begin, &end);
  if (!p.cached) count_tokens(p, counters + warp * n, g, begin, end);
  if (!comm::rank_barrier(p.sym, p.sync, p.wait)) return;

  if (!p.cached) {
    const unsigned long long key = __ldcg(p.error_key);
    const bool input_error = key != ~0ull;
    if (input_error && blockIdx.x == 0 && threadIdx.x == 0) publish_input_error(p, key);
    compute_bases(p, counters, input_error);
    if (!input_error) dispatch_fresh_range(p, st, counters + warp * n, begin, end);
  } else {
    dispatch_cached_range(p, st, begin, end);
  }
  drain_bulk_stores();
  if (!comm::rank_barrier(p.sym, p.sync, p.wait)) return;
  ptx::fence_proxy_async_global();  // peers' bulk stores (published by the barrier) -> our bulk loads
  copy_epilogue(p, st, counters);
  drain_bulk_stores();
}

}  // namespace

int dispatch_num_buffers(const layout::EpDims& dims, uint32_t record_stride) {
  int max_smem = 0, device = 0;
  SYMMOE_CUDA_CHECK(cudaGetDevice(&device));
  SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  for (int b = 2; b >= 1; --b)
    if (dispatch_smem_bytes(dims, record_stride, b) <= size_t(max_smem)) return b;
  return 0;
}

size_t dispatch_smem_bytes(const layout::EpDims& dims, uint32_t record_stride, int num_buffers) {
  return align_up<size_t>(counters_bytes(dims) + barriers_bytes(), kStageAlign) +
         size_t(kNumWarps) * num_buffers * record_stride;
}

void launch_dispatch(const DispatchParams& p, int num_ctas, cudaStream_t stream) {
  const size_t smem = dispatch_smem_bytes(p.layout.dims(), p.layout.token_record().stride, p.num_buffers);
  // Raise the kernel's shared-memory limit once per device (cheap host path; nothing to do inside graph capture).
  static int configured[64] = {};
  int device = 0;
  SYMMOE_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= 64 || configured[device] < int(smem)) {
    SYMMOE_CUDA_CHECK(cudaFuncSetAttribute(dispatch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    if (device < 64) configured[device] = int(smem);
  }
  dispatch_kernel<<<num_ctas, kNumThreads, smem, stream>>>(p);
  SYMMOE_CUDA_CHECK_LAUNCH("ep dispatch_kernel");
}

}  // namespace symmoe::ep
