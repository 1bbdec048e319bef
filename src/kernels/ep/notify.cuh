// Notify role of dispatch: routing chunks in shared memory, per-warp counting with input checks, slot bases, and
// the cross-rank count exchange.
//
// Design: the tokens of a rank are split into contiguous ranges, one per warp of the grid (warp g of G owns
// [g * ceil(T/G), ...)), so CTA c owns a contiguous block of tokens. Phase 1 (count_tokens) counts, per warp, the
// tokens sent to each destination rank (a token once per rank: its master lane) and the (token, lane) pairs per
// global expert; the CTA sums its warps into one row of the workspace. After a grid-wide sync, phase 2
// (compute_bases) gives each warp the counts of all earlier CTAs (<= num_ctas rows from L2) plus those of the
// earlier warps of its CTA (shared memory), so the warp's serial walk over its range (dispatch.cuh) hands out
// slot = rank of the token among the tokens this source sends to d, in token order: exactly the golden model's
// order, deterministic at no extra cost. CTA 0 also sums the totals, writes the handle's source-side counts and
// stores the counts into every rank's recv_rank_counts[src][*] and the destinations' recv_expert_counts[src][*]
// (plain system-scope stores, published by the entry barrier that follows).
// Routing is read in chunks of kRouteChunk (token, lane) entries per warp with all loads in flight, then walked
// from shared memory: the serial per-token walk never waits on a global load.
// NOTES: the counts are written BEFORE the entry barrier, into the half of the count regions selected by the
// barrier epoch's parity: a peer may already write call n+1's counts while this rank still reads call n's (it
// reads them after call n's barrier, anywhere in its kernel), but never call n+2's (that needs this rank's
// arrival at n+1's barrier).
#pragma once

#include "kernels/comm/sym_buffer.cuh"
#include "kernels/common/input_error.cuh"
#include "kernels/ep/common.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ep {

constexpr int kRouteChunk = 256;  // (token, lane) entries per warp chunk: 8 loads per lane

// One warp's routing chunk in shared memory: idx (int64), weights, and (cached) the handle's slot indices.
struct RouteChunk {
  int64_t* idx;
  float* weights;
  int32_t* slots;
  int first;  // first token of the chunk
  __device__ __forceinline__ int64_t expert(int t, int k) const { return idx[(t - first) * num_topk + k]; }
  __device__ __forceinline__ float weight(int t, int k) const { return weights[(t - first) * num_topk + k]; }
  __device__ __forceinline__ int32_t slot(int t, int k) const { return slots[(t - first) * num_topk + k]; }
  int num_topk;
};

__host__ __device__ constexpr size_t route_chunk_bytes() { return size_t(kRouteChunk) * (8 + 4 + 4); }

__device__ __forceinline__ RouteChunk make_route_chunk(uint8_t* smem, int num_topk) {
  RouteChunk c;
  c.idx = reinterpret_cast<int64_t*>(smem);
  c.weights = reinterpret_cast<float*>(smem + kRouteChunk * 8);
  c.slots = reinterpret_cast<int32_t*>(smem + kRouteChunk * 12);
  c.first = 0;
  c.num_topk = num_topk;
  return c;
}

// Tokens per chunk (>= 1 since K <= 32).
__device__ __forceinline__ int route_chunk_tokens(int num_topk) { return kRouteChunk / num_topk; }

// One warp: loads the routing of tokens [t0, t1) ((t1 - t0) * K <= kRouteChunk). with_weights / with_slots select
// the optional arrays; idx comes from `topk_idx` (the input or the handle's copy).
__device__ __forceinline__ void load_route_chunk(RouteChunk& c, const int64_t* topk_idx, const float* weights,
                                                 const int32_t* slots, int t0, int t1) {
  const int K = c.num_topk, n = (t1 - t0) * K, lane = lane_id();
  const int64_t base = int64_t(t0) * K;
  constexpr int kPerLane = kRouteChunk / 32;
  __syncwarp();  // the previous chunk has been read
  int64_t e[kPerLane];
  float w[kPerLane];
  int32_t s[kPerLane];
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    const int j = u * 32 + lane;
    if (j < n) {
      e[u] = __ldg(topk_idx + base + j);
      if (weights) w[u] = __ldg(weights + base + j);
      if (slots) s[u] = __ldg(slots + base + j);
    }
  }
#pragma unroll
  for (int u = 0; u < kPerLane; ++u) {
    const int j = u * 32 + lane;
    if (j < n) {
      c.idx[j] = e[u];
      if (weights) c.weights[j] = w[u];
      if (slots) c.slots[j] = s[u];
    }
  }
  c.first = t0;
  __syncwarp();
}

// True when the warp's whole range fits one routing chunk: count_tokens then loads the weights with the routing
// and the push reuses the chunk.
__device__ __forceinline__ bool range_in_one_chunk(int begin, int end, int num_topk) {
  return end - begin <= route_chunk_tokens(num_topk);
}

// Token range [begin, end) of global warp `g` out of `num_warps`.
__device__ __forceinline__ void warp_token_range(int num_tokens, int g, int num_warps, int* begin, int* end) {
  const int per_warp = (num_tokens + num_warps - 1) / num_warps;
  *begin = min(num_tokens, g * per_warp);
  *end = min(num_tokens, *begin + per_warp);
}

// Phase 1, one warp: counts[R + E] (this warp's shared-memory row).
__device__ __forceinline__ void count_tokens(const DispatchParams& p, RouteChunk& chunk, int* counts, int begin,
                                             int end) {
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, E = dims.num_experts, K = dims.num_topk, El = dims.num_local_experts();
  const int lane = lane_id(), per_chunk = route_chunk_tokens(K);
  for (int j = lane; j < R + E; j += 32) counts[j] = 0;
  __syncwarp();
  for (int t0 = begin; t0 < end; t0 += per_chunk) {
    const int t1 = min(end, t0 + per_chunk);
    load_route_chunk(chunk, p.topk_idx, range_in_one_chunk(begin, end, K) ? p.topk_weights : nullptr, nullptr, t0, t1);
    for (int t = t0; t < t1; ++t) {
      const int64_t e = lane < K ? chunk.expert(t, lane) : int64_t(-1);
      const LaneRoute r = route_lane(e, K, E, El);
      // Input checks: out-of-range ids, and a valid expert repeated in the token (reported at the later lane).
      const uint32_t same = __match_any_sync(
          0xffffffffu, r.valid ? static_cast<unsigned long long>(e) : static_cast<unsigned long long>(-1 - lane));
      const bool out_of_range = lane < K && (e < -1 || e >= E);
      const bool duplicate = r.valid && (__ffs(same) - 1) != lane;
      if (out_of_range) atomicMin(p.error_key, input_error_key(t, lane, InputErrorKind::kOutOfRange));
      if (duplicate) atomicMin(p.error_key, input_error_key(t, lane, InputErrorKind::kDuplicate));
      if (r.master) counts[r.dst_rank] += 1;  // one master lane per destination: no two lanes share an address
      if (r.valid && !duplicate) counts[R + int(e)] += 1;
      __syncwarp();
    }
  }
}

// Whole CTA after phase 1: the CTA's total row (sum of its warps' rows) -> workspace row blockIdx.x.
__device__ __forceinline__ void publish_cta_counts(const DispatchParams& p, const int* counts) {
  const auto& dims = p.layout.dims();
  const int n = dims.num_ranks + dims.num_experts;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    int sum = 0;
    for (int w = 0; w < kNumWarps; ++w) sum += counts[w * n + j];
    p.warp_counts[int64_t(blockIdx.x) * n + j] = sum;
  }
}

// Host-visible record of the first bad entry (smallest token, then lane). One thread.
__device__ __forceinline__ void publish_input_error(const DispatchParams& p, unsigned long long key) {
  const int64_t* token_experts =
      p.topk_idx + int64_t(symmoe::kernel::input_error_token(key)) * p.layout.dims().num_topk;
  symmoe::kernel::write_input_error(p.error, key, token_experts);
}

// Phase 2, whole CTA (after a grid-wide sync): counts[w][R + E] (the warps' own counts, shared) become
// bases[w][R + E] = counts of all tokens before warp w's range. CTA 0 also writes the totals to the handle and to
// the destinations (zeros when the input was bad): per-rank totals into EVERY rank's recv_rank_counts[rank][*],
// per-expert totals into the owning rank's recv_expert_counts[rank][*].
// NOTES: every CTA reads all num_ctas rows with kBatch loads in flight per thread (one L2 round trip per batch),
// so CTA 0, whose totals gate the barrier, never walks the rows one load at a time.
__device__ __forceinline__ void compute_bases(const DispatchParams& p, int* counts, bool input_error, uint32_t parity) {
  constexpr int kBatch = 16;
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, E = dims.num_experts, El = dims.num_local_experts(), n = R + E;
  const int32_t* wc = p.warp_counts;
  const int num_ctas = int(gridDim.x), first = int(blockIdx.x);
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    int before = 0, total = 0;
    for (int c0 = 0; c0 < num_ctas; c0 += kBatch) {
      int v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) v[u] = c0 + u < num_ctas ? __ldcg(wc + int64_t(c0 + u) * n + j) : 0;
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        total += v[u];
        if (c0 + u < first) before += v[u];
      }
    }
    for (int w = 0; w < kNumWarps; ++w) {
      const int mine = counts[w * n + j];
      counts[w * n + j] = before;
      before += mine;
    }
    if (blockIdx.x != 0) continue;
    const uint64_t sent = input_error ? 0 : uint64_t(total);
    if (j < R) {
      p.handle.num_tokens_per_rank[j] = int32_t(sent);
      for (int d = 0; d < R; ++d)
        ptx::st_relaxed_sys(p.sym.map(p.layout.get_recv_rank_count(parity, p.rank, j), uint32_t(d)), sent);
    } else {
      const int e = j - R, d = e / El;
      p.handle.num_tokens_per_expert[e] = int32_t(sent);
      ptx::st_relaxed_sys(p.sym.map(p.layout.get_recv_expert_count(parity, p.rank, e - d * El), uint32_t(d)), sent);
    }
  }
  __syncthreads();
}

// Cached dispatch, CTA 0: the handle's per-rank counts -> every rank's recv_rank_counts[rank][*] (the senders
// need them for their output rows; the receivers use the handle's prefix sums).
__device__ __forceinline__ void publish_cached_counts(const DispatchParams& p, uint32_t parity) {
  if (blockIdx.x != 0) return;
  const int R = p.layout.dims().num_ranks;
  for (int i = threadIdx.x; i < R * R; i += blockDim.x) {
    const int j = i % R, d = i / R;
    ptx::st_relaxed_sys(p.sym.map(p.layout.get_recv_rank_count(parity, p.rank, j), uint32_t(d)),
                        uint64_t(p.handle.num_tokens_per_rank[j]));
  }
}

// Whole CTA, after the entry barrier (which publishes the counts): row_base[d] = tokens that sources < this rank
// send to d (the first output row of this rank's tokens on d), from the local copy of the count matrix.
__device__ __forceinline__ void dest_row_bases(const DispatchParams& p, int* row_base, uint32_t parity) {
  const int R = p.layout.dims().num_ranks;
  for (int d = threadIdx.x; d < R; d += blockDim.x) {
    uint64_t sum = 0;
    for (int s = 0; s < p.rank; ++s) sum += __ldcg(p.layout.get_recv_rank_count(parity, s, d));
    row_base[d] = int(sum);
  }
  __syncthreads();
}

}  // namespace symmoe::ep
