// The dispatch kernel: wires notify (count + bases + count exchange), dispatch (push) and the copy epilogue.
//   fresh:  count -> grid sync -> bases, counts to the destinations -> counts barrier -> row bases, receive
//           metadata, push (x straight into the destinations' output rows) -> rank barrier -> copy epilogue
//   cached: handle's counts to the destinations -> counts barrier -> the same push with the handle's slots -> ...
// The first barrier publishes the counts and guarantees every peer finished the previous EP call (its epilogue
// read its rows), so each call's writes into peer memory are safe without counters to reset (CUDA graphs replay
// freely). Counts are written before it: every reader reads them before the second barrier (notify.cuh NOTES).
// NOTES: all CTAs must be co-resident (grid syncs): the host clamps the grid to the rank's SM share.
// Round 1 (bench ep, nvidia-h200-x2, 2026-11-29, V3 FP8, 2 ranks, 8192 tokens/rank, 24 SMs): 556 us, 30% of the
// peer-copy ceiling: serial per-token global loads (routing) and bulk-load waits, and a copy epilogue moving every
// received record again after all pushes. This version: routing chunks in shared memory, register copies with
// 8 KB per warp in flight (12 warps), no copy in non-expand mode. Measured (same bench, 2026-11-29): 282 us at
// 24 SMs (NVLink 218 GB/s, 60% of 363), 258 us at 32, ~26 us at 128 tokens/rank. Time no longer scales with SMs
// (16 SMs: 272 us): the remaining gap is the fixed part (~25 us: 2 barriers, 2 grid syncs, the remote count read)
// and a push that reaches ~245 GB/s per direction; per-row arrival flags (as combine) would drop the second
// barrier and overlap the metadata epilogue.
#include "kernels/comm/barrier.cuh"
#include "kernels/ep/copy_epilogue.cuh"
#include "kernels/ep/dispatch.cuh"
#include "kernels/ep/notify.cuh"
#include "symmoe/cuda_check.hpp"

namespace symmoe::ep {
namespace {

// Shared memory: [kNumWarps][R + E] counters/bases | [kNumWarps] routing chunks | [R] row bases | receive scratch.
__host__ __device__ constexpr size_t counters_bytes(const layout::EpDims& d) {
  return align_up<size_t>(size_t(kNumWarps) * (d.num_ranks + d.num_experts) * 4, 16);
}
__host__ __device__ constexpr size_t chunks_offset(const layout::EpDims& d) { return counters_bytes(d); }
__host__ __device__ constexpr size_t row_base_offset(const layout::EpDims& d) {
  return chunks_offset(d) + size_t(kNumWarps) * route_chunk_bytes();
}
__host__ __device__ constexpr size_t scratch_offset(const layout::EpDims& d) {
  return row_base_offset(d) + align_up<size_t>(size_t(d.num_ranks) * 4, 16);
}

// The first barrier: only CTA 0 wrote what it publishes (the counts), and every CTA of this rank finished the
// previous call (kernel order), so CTA 0 meets the peers and one grid sync releases the others: rank_barrier
// without its leading grid sync (~1.5 us less at every size).
__device__ __forceinline__ bool counts_barrier(const DispatchParams& p) {
  if (blockIdx.x == 0) {
    __syncthreads();  // CTA 0's count stores (any warp) before warp 0's releasing fence
    comm::cross_rank_barrier_block(p.sym, p.sync, p.wait);
  }
  return comm::grid_sync(p.sync.grid_sync_counter(), p.wait) && !comm::aborted(p.wait);
}

__global__ void __launch_bounds__(kNumThreads, 1) dispatch_kernel(const __grid_constant__ DispatchParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  const auto& dims = p.layout.dims();
  const int n = dims.num_ranks + dims.num_experts;
  const int warp = warp_id(), g = blockIdx.x * kNumWarps + warp, num_warps = gridDim.x * kNumWarps;
  int* counters = reinterpret_cast<int*>(smem);
  RouteChunk chunk = make_route_chunk(smem + chunks_offset(dims) + size_t(warp) * route_chunk_bytes(), dims.num_topk);
  int* row_base = reinterpret_cast<int*>(smem + row_base_offset(dims));
  int* scratch = reinterpret_cast<int*>(smem + scratch_offset(dims));

  int begin, end;
  warp_token_range(p.num_tokens, g, num_warps, &begin, &end);
  bool input_error = false;
  if (!p.cached) {
    count_tokens(p, chunk, counters + warp * n, begin, end);
    publish_cta_counts(p, counters);
    if (!comm::grid_sync(p.sync.grid_sync_counter(), p.wait)) return;
    const unsigned long long key = __ldcg(p.error_key);
    input_error = key != ~0ull;
    if (input_error && blockIdx.x == 0 && threadIdx.x == 0) publish_input_error(p, key);
    compute_bases(p, counters, input_error);
  } else {
    publish_cached_counts(p);
  }
  if (!counts_barrier(p)) return;
  dest_row_bases(p, row_base);
  const RecvMeta m = receive_metadata(p, scratch);
  if (!p.cached) {
    if (!input_error) dispatch_fresh_range(p, chunk, row_base, counters + warp * n, begin, end);
  } else {
    dispatch_cached_range(p, chunk, row_base, begin, end);
  }
  if (!comm::rank_barrier(p.sym, p.sync, p.wait)) return;
  copy_epilogue(p, m);
}

}  // namespace

size_t dispatch_smem_bytes(const layout::EpDims& dims) {
  return scratch_offset(dims) + size_t(receive_scratch_ints(dims)) * 4;
}

void launch_dispatch(const DispatchParams& p, int num_ctas, cudaStream_t stream) {
  const size_t smem = dispatch_smem_bytes(p.layout.dims());
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
