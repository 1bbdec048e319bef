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
// 340 GB/s per direction on 24 SMs (inferred from phase-skip timings, docs/notes/ep.md, not isolated).
// NOTES: one grid sync per call is cheaper than having every CTA count all tokens to avoid it. The measurement
// history and the variants tried: docs/notes/ep.md.
#include <mutex>

#include "kernels/comm/grid_sync.cuh"
#include "kernels/ep/copy_epilogue.cuh"
#include "kernels/ep/dispatch.cuh"
#include "kernels/ep/entry_barrier.cuh"
#include "kernels/ep/notify.cuh"
#include "kernels/ep/smem_layout.hpp"
#include "symmoe/cuda_check.hpp"

namespace symmoe::ep {
namespace {

__global__ void __launch_bounds__(kNumThreads, 1) dispatch_kernel(const __grid_constant__ DispatchParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int pushed[layout::kMaxRanks];  // tokens this CTA pushed per destination
  const auto& dims = p.layout.dims();
  const DispatchSmemLayout shared(dims, reinterpret_cast<uint64_t>(smem));
  const int warp = warp_id(), g = blockIdx.x * kNumWarps + warp, num_warps = gridDim.x * kNumWarps;
  int* counters = shared.counters(0);  // all warps' rows (publish_cta_counts, compute_bases)
  int* warp_counters = shared.counters(warp);
  RouteChunk chunk = make_route_chunk(shared.route_chunk(warp), dims.num_topk);
  int* row_base = shared.row_base();
  const uint32_t epoch = *p.sync.barrier_epoch();  // advanced only by this kernel's last departing CTA
  const uint32_t parity = epoch & 1u;
  for (int d = threadIdx.x; d < dims.num_ranks; d += blockDim.x) pushed[d] = 0;
  if (blockIdx.x == 0)  // this call's arrivals start from 0 (peers add only after the entry barrier below)
    for (int s = threadIdx.x; s < dims.num_ranks; s += blockDim.x) *p.layout.get_recv_arrivals(s) = 0u;

  int begin, end;
  warp_token_range(p.num_tokens, g, num_warps, &begin, &end);
  BulkRowPipe pipe;  // row loads start now: they need only the token range
  pipe.start(shared.bulk_pipe(warp), p.x, uint32_t(p.x_row_bytes), p.x_sf, p.sf_row_bytes, begin, end);
  bool input_error = false, ok = true;
  if (!p.cached) {
    count_tokens(p, chunk, warp_counters, begin, end);
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
    if (!input_error) dispatch_fresh_range(p, chunk, row_base, pushed, warp_counters, begin, end, pipe);
  } else {
    dispatch_cached_range(p, chunk, row_base, pushed, begin, end, pipe);
  }
  pipe.finish();
  signal_arrivals(p, pushed);
  const RecvMeta m = receive_metadata(p, shared, parity);
  leave();
  copy_epilogue(p, m);
}

}  // namespace

size_t dispatch_smem_bytes(const layout::EpDims& dims) { return size_t(DispatchSmemLayout(dims).num_bytes()); }

void launch_dispatch(const DispatchParams& p, int num_ctas, cudaStream_t stream) {
  const size_t smem = dispatch_smem_bytes(p.layout.dims());
  // Raise the kernel's shared-memory limit per device when a launch needs more than set so far (cheap host path,
  // nothing to do inside graph capture). Ranks of one process launch from several threads: the limit only grows,
  // under a lock, so a concurrent smaller request never lowers it below what another thread's launch needs.
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static int configured[kMaxDevices] = {};
  int device = 0;
  SYMMOE_CUDA_CHECK(cudaGetDevice(&device));
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (device >= kMaxDevices || configured[device] < int(smem)) {
      SYMMOE_CUDA_CHECK(cudaFuncSetAttribute(dispatch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      if (device < kMaxDevices) configured[device] = int(smem);
    }
  }
  dispatch_kernel<<<num_ctas, kNumThreads, smem, stream>>>(p);
  SYMMOE_CUDA_CHECK_LAUNCH("ep dispatch_kernel");
}

}  // namespace symmoe::ep
