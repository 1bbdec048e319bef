// The combine kernel: entry barrier (entry_barrier.cuh) -> half the warps send rows back (combine.cuh), the other
// half reduce each token as soon as its rows' arrival flags are up (reduce_epilogue.cuh). The barrier guarantees
// every source finished its previous reduce (and reset its flags) before its combine_recv is overwritten.
// NOTES: senders never wait, so reducers (bounded flag waits) cannot deadlock; all CTAs are co-resident.
// NOTES: in non-expand mode the local rows are not copied (the reduce reads them from x).
// NOTES: cost (bench ep, V3 BF16, 2 ranks): 576 us at 8192 tokens/rank on 24 SMs, 476 on 32; 18.4 us at 128.
// Where 8192 goes (phase-skip timings, 24 SMs, 16 warps): without the rows sent 422 us, without the reduce 416,
// with neither (flags and fences only) 120: the per-row fences are not the limit; each half alone is a latency chain
// per warp (a row = 2 dependent 8-KB load batches; a token = 6 dependent load steps after its flag), so the time
// falls with more SMs. The measurement history and the variants tried: docs/notes/ep.md.
#include "kernels/ep/entry_barrier.cuh"
#include "kernels/ep/reduce_epilogue.cuh"
#include "symmoe/cuda_check.hpp"

namespace symmoe::ep {
namespace {

// Sender and reducer warps: layout::EpCombineRoles. NOTES: a sender warp moves ~14 KB per row and waits for one
// sys-scope fence per row; half the warps send, the other half reduce as rows arrive.
using CombineRoles = layout::EpCombineRoles;

__global__ void __launch_bounds__(CombineRoles::kNumThreads, 1)
    combine_kernel(const __grid_constant__ CombineParams p) {
  __shared__ const int4* lists[CombineRoles::kNumWarps][32];  // per warp: row lists (send: ints, reduce: rows)
  const int warp = warp_id();
  const uint32_t epoch = *p.sync.barrier_epoch();  // advanced only by this kernel's last departing CTA
  const bool ok = entry_barrier(p.sym, p.sync, p.wait, epoch);
  depart(p.layout.get_departures(), p.sync, epoch, [] {});
  if (!ok) return;
  if (CombineRoles::is_send_warp(warp)) {
    const int g = blockIdx.x * CombineRoles::kNumSendWarps + warp;
    const int num_warps = gridDim.x * CombineRoles::kNumSendWarps;
    const int num_recv = p.handle.device_counts[0];
    combine_send_rows(p, g, num_warps, num_recv, reinterpret_cast<int*>(lists[warp]));
  } else if (p.handle.device_counts[2] == 0) {  // this rank's dispatch had bad routing: it sent nothing, writes nothing
    const int g = blockIdx.x * CombineRoles::kNumReduceWarps + CombineRoles::reduce_warp_index(warp);
    const int num_warps = gridDim.x * CombineRoles::kNumReduceWarps;
    const int first_row = local_first_row(p);
    ReduceRoute route = load_reduce_route(p, g);
    for (int t = g; t < p.num_tokens; t += num_warps) {
      const ReduceRoute next = load_reduce_route(p, t + num_warps);
      if (!reduce_token(p, t, lists[warp], route, first_row)) return;
      route = next;
    }
  }
}

}  // namespace

void launch_combine(const CombineParams& p, int num_ctas, cudaStream_t stream) {
  combine_kernel<<<num_ctas, CombineRoles::kNumThreads, 0, stream>>>(p);
  SYMMOE_CUDA_CHECK_LAUNCH("ep combine_kernel");
}

}  // namespace symmoe::ep
