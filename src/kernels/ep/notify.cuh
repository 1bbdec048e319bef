// Notify role of dispatch: per-warp counting with input checks, then per-warp slot bases and the cross-rank count
// exchange.
//
// Design: the tokens of a rank are split into contiguous ranges, one per warp of the grid (warp g of G owns
// [g * ceil(T/G), ...)). Phase 1 (count_tokens) counts, per warp, the tokens sent to each destination rank (a token
// once per rank: its master lane) and the (token, lane) pairs per global expert, and writes them to the workspace.
// After a grid-wide sync, phase 2 (compute_bases) gives each warp the exclusive prefix of all earlier warps, so the
// warp's serial walk over its range (dispatch.cuh) hands out slot = rank of the token among the tokens this source
// sends to d, in token order: exactly the golden model's order, deterministic at no extra cost. CTA 0 also sums
// the totals, writes the handle's source-side counts and stores the counts into every destination's
// recv_rank_counts[src] / recv_expert_counts[src][*] (plain system-scope stores, published by the next barrier).
// NOTES: phase 2 reads G x (R + E) ints from L2 (G = CTAs x 8 warps); ~1-3 us at 24 SMs, loads unrolled by 8.
#pragma once

#include "kernels/comm/sym_buffer.cuh"
#include "kernels/ep/common.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ep {

__device__ __forceinline__ unsigned long long input_error_key(int token, int lane, InputErrorKind kind) {
  return (static_cast<unsigned long long>(token) << 32) | (static_cast<unsigned long long>(lane) << 8) |
         static_cast<unsigned long long>(kind);
}

// Token range [begin, end) of global warp `g` out of `num_warps`.
__device__ __forceinline__ void warp_token_range(int num_tokens, int g, int num_warps, int* begin, int* end) {
  const int per_warp = (num_tokens + num_warps - 1) / num_warps;
  *begin = min(num_tokens, g * per_warp);
  *end = min(num_tokens, *begin + per_warp);
}

// Phase 1, one warp: counts[R + E] (this warp's shared-memory row) -> workspace row `g`.
__device__ __forceinline__ void count_tokens(const DispatchParams& p, int* counts, int g, int begin, int end) {
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, E = dims.num_experts, K = dims.num_topk, El = dims.num_local_experts();
  const int lane = lane_id();
  for (int j = lane; j < R + E; j += 32) counts[j] = 0;
  __syncwarp();
  for (int t = begin; t < end; ++t) {
    const int64_t e = load_expert(p.topk_idx, t, K);
    const LaneRoute r = route_lane(e, K, E, El);
    // Input checks: out-of-range ids, and a valid expert repeated in the token (reported at the later lane).
    const uint32_t same = __match_any_sync(0xffffffffu, r.valid ? static_cast<unsigned long long>(e)
                                                                : static_cast<unsigned long long>(-1 - lane));
    const bool out_of_range = lane < K && (e < -1 || e >= E);
    const bool duplicate = r.valid && (__ffs(same) - 1) != lane;
    if (out_of_range) atomicMin(p.error_key, input_error_key(t, lane, InputErrorKind::kOutOfRange));
    if (duplicate) atomicMin(p.error_key, input_error_key(t, lane, InputErrorKind::kDuplicate));
    if (r.master) counts[r.dst_rank] += 1;  // one master lane per destination: no two lanes share an address
    if (r.valid && !duplicate) counts[R + int(e)] += 1;
    __syncwarp();
  }
  int32_t* out = p.warp_counts + static_cast<int64_t>(g) * (R + E);
  for (int j = lane; j < R + E; j += 32) out[j] = counts[j];
}

// Host-visible record of the first bad entry (smallest token, then lane). One thread.
__device__ __forceinline__ void publish_input_error(const DispatchParams& p, unsigned long long key) {
  const int K = p.layout.dims().num_topk;
  const int token = int(key >> 32), lane = int((key >> 8) & 0xff);
  const int64_t value = p.topk_idx[int64_t(token) * K + lane];
  int first = -1;
  for (int j = 0; j < lane && first < 0; ++j)
    if (p.topk_idx[int64_t(token) * K + j] == value) first = j;
  p.error->value = value;
  p.error->token = token;
  p.error->lane = lane;
  p.error->kind = int32_t(key & 0xff);
  p.error->first_lane = first;
  __threadfence_system();
  ptx::st_relaxed_sys(&p.error->valid, 1u);
}

// Phase 2, whole CTA (after a grid-wide sync): bases[w][R + E] = counts of all warps before warp w of this CTA.
// CTA 0 also writes the totals to the handle and to the destinations (zeros when the input was bad).
__device__ __forceinline__ void compute_bases(const DispatchParams& p, int* bases, bool input_error) {
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, E = dims.num_experts, El = dims.num_local_experts(), n = R + E;
  const int first = blockIdx.x * kNumWarps, num_warps = gridDim.x * kNumWarps;
  const int32_t* wc = p.warp_counts;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    int run = 0, g = 0;
    for (; g + 8 <= first; g += 8) {
      int v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = __ldcg(wc + int64_t(g + u) * n + j);
#pragma unroll
      for (int u = 0; u < 8; ++u) run += v[u];
    }
    for (; g < first; ++g) run += __ldcg(wc + int64_t(g) * n + j);
    for (int w = 0; w < kNumWarps; ++w) {
      bases[w * n + j] = run;
      run += __ldcg(wc + int64_t(first + w) * n + j);
    }
    if (blockIdx.x != 0) continue;
    for (g = first + kNumWarps; g < num_warps; ++g) run += __ldcg(wc + int64_t(g) * n + j);
    const uint64_t total = input_error ? 0 : uint64_t(run);
    if (j < R) {
      p.handle.num_tokens_per_rank[j] = int32_t(total);
      ptx::st_relaxed_sys(p.sym.map(p.layout.get_recv_rank_count(p.rank), uint32_t(j)), total);
    } else {
      const int e = j - R, d = e / El;
      p.handle.num_tokens_per_expert[e] = int32_t(total);
      ptx::st_relaxed_sys(p.sym.map(p.layout.get_recv_expert_count(p.rank, e - d * El), uint32_t(d)), total);
    }
  }
  __syncthreads();
}

}  // namespace symmoe::ep
