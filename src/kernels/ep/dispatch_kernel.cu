// The dispatch kernel: wires notify (count + bases + count exchange), dispatch (push) and the copy epilogue.
//   fresh:  count -> grid sync -> bases, counts to every rank -> entry barrier (CTA 0 arrives, every CTA waits)
//           -> row bases (local) -> push (x straight into the destinations' output rows) -> per-CTA arrival
//           counts to the destinations -> receive metadata -> copy epilogue (each source's rows once they landed)
//   cached: handle's counts to every rank -> entry barrier -> the same push with the handle's slots -> ...
// The entry barrier (entry_barrier.cuh) publishes the counts and guarantees every peer entered this call, i.e.
// finished reading its outputs of the previous one, so each call's writes into peer memory are safe without
// counters to reset by the host (CUDA graphs replay freely). One barrier and one grid sync per call.
// NOTES: all CTAs must be co-resident (grid sync, waits on other ranks' CTAs): the host clamps the grid to the
// rank's SM share.
// NOTES: cost (bench ep, V3 FP8, 2 ranks): ~265 us at 8192 tokens/rank on 24 SMs, 270 on 16; 19.2-19.8 us at 128.
// At 8192 the remote rows add ~140-160 us on top of each warp's serial walk (count, slots, records, ~3 pieces per
// token through a 2-deep bulk pipe) instead of overlapping it: they move ~225 GB/s where a plain peer copy reaches
// 340 GB/s per direction on 24 SMs (inferred from `bench ep --skip` sums, not isolated).
// NOTES: one grid sync per call is cheaper than having every CTA count all tokens to avoid it (73 vs 30.6 us at 512
// tokens). The measurement history and the variants tried: docs/notes/ep.md.
#include "kernels/comm/grid_sync.cuh"
#include "kernels/ep/copy_epilogue.cuh"
#include "kernels/ep/dispatch.cuh"
#include "kernels/ep/entry_barrier.cuh"
#include "kernels/ep/notify.cuh"
#include "symmoe/cuda_check.hpp"

namespace symmoe::ep {
namespace {

// Shared memory: [kNumWarps][R + E] counters/bases | [kNumWarps] routing chunks | [kNumWarps] bulk pipes |
// [R] row bases | receive scratch.
__host__ __device__ constexpr size_t counters_bytes(const layout::EpDims& d) {
  return align_up<size_t>(size_t(kNumWarps) * (d.num_ranks + d.num_experts) * 4, 16);
}
__host__ __device__ constexpr size_t chunks_offset(const layout::EpDims& d) { return counters_bytes(d); }
__host__ __device__ constexpr size_t pipes_offset(const layout::EpDims& d) {
  return chunks_offset(d) + size_t(kNumWarps) * route_chunk_bytes();
}
__host__ __device__ constexpr size_t row_base_offset(const layout::EpDims& d) {
  return pipes_offset(d) + size_t(kNumWarps) * bulk_pipe_bytes();
}
__host__ __device__ constexpr size_t scratch_offset(const layout::EpDims& d) {
  return row_base_offset(d) + align_up<size_t>(size_t(d.num_ranks) * 4, 16);
}

__global__ void __launch_bounds__(kNumThreads, 1) dispatch_kernel(const __grid_constant__ DispatchParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int pushed[layout::kMaxRanks];  // tokens this CTA pushed per destination
  const auto& dims = p.layout.dims();
  const int n = dims.num_ranks + dims.num_experts;
  const int warp = warp_id(), g = blockIdx.x * kNumWarps + warp, num_warps = gridDim.x * kNumWarps;
  int* counters = reinterpret_cast<int*>(smem);
  RouteChunk chunk = make_route_chunk(smem + chunks_offset(dims) + size_t(warp) * route_chunk_bytes(), dims.num_topk);
  int* row_base = reinterpret_cast<int*>(smem + row_base_offset(dims));
  int* scratch = reinterpret_cast<int*>(smem + scratch_offset(dims));
  const uint32_t epoch = *p.sync.barrier_epoch();  // advanced only by this kernel's last departing CTA
  const uint32_t parity = epoch & 1u;
  for (int d = threadIdx.x; d < dims.num_ranks; d += blockDim.x) pushed[d] = 0;
  if (blockIdx.x == 0)  // this call's arrivals start from 0 (peers add only after the entry barrier below)
    for (int s = threadIdx.x; s < dims.num_ranks; s += blockDim.x) *p.layout.get_recv_arrivals(s) = 0u;

  int begin, end;
  warp_token_range(p.num_tokens, g, num_warps, &begin, &end);
  BulkRowPipe pipe;  // row loads start now: they need only the token range
  pipe.start(smem + pipes_offset(dims) + size_t(warp) * bulk_pipe_bytes(), p.x, uint32_t(p.x_row_bytes), p.x_sf,
               p.sf_row_bytes, begin, end);
  bool input_error = false, ok = true;
  if (!p.cached) {
    count_tokens(p, chunk, counters + warp * n, begin, end);
    publish_cta_counts(p, counters);
    ok = comm::grid_sync(p.sync.grid_sync_counter(), p.wait);
    if (ok) {
      const unsigned long long key = __ldcg(p.error_key);
      input_error = key != ~0ull;
      if (input_error && blockIdx.x == 0 && threadIdx.x == 0) publish_input_error(p, key);
      compute_bases(p, counters, input_error, parity);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) p.handle.device_counts[2] = input_error ? 1 : 0;  // read by combine
  } else {
    publish_cached_counts(p, parity);
    __syncthreads();  // CTA 0's count stores (any warp) before warp 0's releasing fence
  }
  ok = ok && entry_barrier(p.sym, p.sync, p.wait, epoch);
  // Every CTA read the error key above: the last to depart resets it for the next call. Departure comes late (after
  // the pushes): thread 0's atomic then overlaps the wait for the peers' rows instead of delaying warp 0's pushes.
  const auto leave = [&] { depart(p.layout.get_departures(), p.sync, epoch, [&] { *p.error_key = ~0ull; }); };
  if (!ok) {
    pipe.finish();
    leave();
    return;
  }
  dest_row_bases(p, row_base, parity);
  if (!p.cached) {
    if (!input_error) dispatch_fresh_range(p, chunk, row_base, pushed, counters + warp * n, begin, end, pipe);
  } else {
    dispatch_cached_range(p, chunk, row_base, pushed, begin, end, pipe);
  }
  pipe.finish();
  signal_arrivals(p, pushed);
  const RecvMeta m = receive_metadata(p, scratch, parity);
  leave();
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
