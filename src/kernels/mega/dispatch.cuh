// Dispatch role of the fused kernel (docs/design.md §8.3, pull dispatch), in three steps:
//  1. count_and_publish (every thread of every CTA, before the first rank barrier): for each routed (token, lane)
//     of this rank, one system-scope atomic on the OWNING rank's counter expert_recv_count[src = this rank][local
//     expert] takes a slot, and the entry token * K + lane is written into that rank's list src_token_topk[local
//     expert][src][slot]. No intra-rank pre-reduction (see NOTES).
//  2. load_expert_counts (every CTA, after the barrier): per local expert its pool segment (start aligned to
//     BLOCK_M, valid rows) and per (expert, source rank) its chunk of the segment, in shared memory — the
//     scheduler's and the pull's one truth.
//  3. pull_rows (the dispatch warps of every CTA, concurrently with the GEMM roles): pool row r of expert e holds,
//     in (source rank, slot) order, the token of the list entry; a warp copies the FP8 row (16 B per lane), its
//     per-128 scales (MN-major), its top-k weight and its source, then releases one arrival on the pool block's
//     l1_arrival_count (gpu scope) for the L1 TMA producer.
// NOTES: the slot order depends on atomic arrival order, so a pool row's position varies between calls; results do
// not (every row is computed independently, and combine sums in top-k lane order). Cost: one NVLink atomic per
// routed pair (~K per token); a per-CTA pre-reduction of the counts would save most of them.
// NOTES: routing errors (an id outside [-1, E), an expert repeated within a token; kernels/common/input_error.hpp)
// are found while counting: the entry is not published, the smallest (token, lane) key is kept in this rank's
// workspace, and the source flag is set on every rank before rank barrier #1. Every rank then treats a flagged
// source's lists as empty (its entries already published are ignored), so a bad rank's tokens reach no GEMM; the
// bad rank writes the host record and skips its combine (y untouched). With valid routing a list holds at most
// T_max entries (one per token); load_expert_counts still clamps, so no input can write out of bounds.
#pragma once

#include "kernels/comm/packed_counter.cuh"
#include "kernels/common/input_error.cuh"
#include "kernels/common/scan.cuh"
#include "kernels/mega/params.hpp"
#include "kernels/mega/scheduler.cuh"
#include "kernels/ptx/sync.cuh"
#include "layout/mega_roles.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::mega::kernel {

using symmoe::kernel::InputErrorKind;

// A bad entry (t, k): keep the smallest key, flag this rank as a bad source on every rank (rare path).
inline __device__ __noinline__ void report_input_error(const MegaParams& p, int t, int k, InputErrorKind kind) {
  atomicMax(p.ws.get_input_error_key(), ~symmoe::kernel::input_error_key(t, k, kind));
  for (uint32_t peer = 0; peer < p.sym.num_ranks; ++peer)
    *p.sym.map(p.ws.get_src_input_error(int(p.sym.rank)), peer) = 1u;
}

__device__ __forceinline__ void count_and_publish(const MegaParams& p, int thread, int num_threads) {
  const layout::MegaDims& d = p.ws.dims();
  const int K = d.num_topk, El = d.num_local_experts();
  for (int i = thread; i < p.num_tokens * K; i += num_threads) {
    const int t = i / K, k = i % K;
    const int64_t* token_experts = p.ws.get_topk_idx(t);
    const int64_t e = token_experts[k];
    if (e == -1) continue;
    InputErrorKind bad = e < -1 || e >= d.num_experts ? InputErrorKind::kOutOfRange : InputErrorKind::kNone;
#pragma unroll 1
    for (int j = 0; j < k && bad == InputErrorKind::kNone; ++j)
      if (token_experts[j] == e) bad = InputErrorKind::kDuplicate;
    if (bad != InputErrorKind::kNone) {
      report_input_error(p, t, k, bad);
      continue;
    }
    const uint32_t dst = uint32_t(e / El);
    const int local_expert = int(e % El);
    uint64_t* counter = p.sym.map(p.ws.get_expert_recv_count(int(p.sym.rank), local_expert), dst);
    const uint32_t slot = comm::packed_count(ptx::atom_add_acq_rel_sys(counter, 1));
    if (slot < uint32_t(d.num_max_tokens_per_rank))
      *p.sym.map(p.ws.get_src_token_topk(local_expert, int(p.sym.rank), int(slot)), dst) = i;  // i = t * K + k
  }
}

// Every thread of the CTA; `ok` false (a failed barrier): every count reads 0, so the CTA computes nothing.
// Counts -> (chunk starts in place, segments aligned to BLOCK_M, wave-end bits) by one CTA-wide prefix sum per
// blockDim.x experts. NOTES: parallel because a serial walk on one thread costs ~0.2 us per local expert, on the
// critical path of every call (docs/notes/mega.md).
template <int BLOCK_M, int BLOCK_N>
__device__ __forceinline__ void load_expert_counts(const MegaParams& p, const ExpertCounts& c, bool ok) {
  const layout::MegaDims& d = p.ws.dims();
  const int R = d.num_ranks, El = d.num_local_experts();
  __shared__ int scan_scratch[32];
  for (int i = threadIdx.x; i < R * El; i += blockDim.x) {  // i = e * R + s
    const uint64_t v = *reinterpret_cast<volatile const uint64_t*>(p.ws.get_expert_recv_count(i % R, i / R));
    const bool bad_source = *reinterpret_cast<volatile const uint32_t*>(p.ws.get_src_input_error(i % R)) != 0;
    c.chunk_start[i] = ok && !bad_source ? min(int(comm::packed_count(v)), d.num_max_tokens_per_rank) : 0;
  }
  for (int w = threadIdx.x; w < (El + 31) / 32; w += blockDim.x) c.wave_last[w] = 0;
  __syncthreads();
  const int pool_rows = int(p.ws.num_pool_rows());
  const int l1_n_blocks = 2 * d.intermediate / BLOCK_N, wave_tiles = max(p.wave_l1_tiles, 1);
  int rows_before = 0;  // padded rows of the experts of earlier chunks (unclamped)
  for (int chunk = 0; chunk < El; chunk += blockDim.x) {
    const int e = chunk + int(threadIdx.x);
    int n = 0;
    if (e < El)
      for (int s = 0; s < R; ++s) n += c.chunk_start[e * R + s];
    const int padded = (n + BLOCK_M - 1) / BLOCK_M * BLOCK_M;
    int chunk_rows = 0;
    const int start = rows_before + symmoe::kernel::cta_exclusive_scan(padded, scan_scratch, &chunk_rows);
    if (e < El) {
      // Clamps act only with invalid routing (see NOTES at the top): the pool then ends early, never overflows.
      const int seg = min(start, pool_rows);
      for (int s = 0, partial = 0; s < R; ++s) {
        const int count = c.chunk_start[e * R + s];
        c.chunk_start[e * R + s] = min(seg + partial, pool_rows);
        partial += count;
      }
      c.seg_start[e] = seg, c.num_rows[e] = min(n, pool_rows - seg);
      // Wave w holds the experts whose L1 tiles start in [w, w + 1) x wave_tiles (scheduler.cuh).
      const int tiles_before = start / BLOCK_M * l1_n_blocks, tiles_after = (start + padded) / BLOCK_M * l1_n_blocks;
      if (e == El - 1 || tiles_before / wave_tiles != tiles_after / wave_tiles)
        atomicOr(c.wave_last + e / 32, 1u << (e % 32));
    }
    rows_before += chunk_rows;
  }
  if (threadIdx.x == 0) c.seg_start[El] = min(rows_before, pool_rows);
  __syncthreads();
}

// One thread, after rank barrier #1, on a rank whose routing was bad: the host record of the first bad entry.
inline __device__ __noinline__ void publish_input_error(const MegaParams& p) {
  const unsigned long long key = ~*reinterpret_cast<volatile unsigned long long*>(p.ws.get_input_error_key());
  symmoe::kernel::write_input_error(p.input_error, key, p.ws.get_topk_idx(symmoe::kernel::input_error_token(key)));
}

// One dispatch warp: the pool rows r = warp_idx, warp_idx + num_warps, ... below the last segment's end; padding
// rows are skipped. A row's (expert, source rank) is a binary search over the chunk starts in shared memory.
// NOTES: written for the few registers of the data warpgroup (MegaRoles::kDataRegisters): little state per row, loops
// not unrolled (nested per-expert/per-source cursors spilled).
template <int BLOCK_M>
__device__ __forceinline__ void pull_rows(const MegaParams& p, const ExpertCounts& c, int warp_idx, int num_warps,
                                          int lane) {
  const layout::MegaDims& d = p.ws.dims();
  const int R = d.num_ranks, El = d.num_local_experts();
  const int num_chunks = R * El, rows_end = c.seg_start[El];
#pragma unroll 1
  for (int r = warp_idx; r < rows_end; r += num_warps) {
    int lo = 0, hi = num_chunks - 1;  // largest chunk with start <= r
#pragma unroll 1
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (c.chunk_start[mid] <= r)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int e = lo / R, s = lo % R;
    const int chunk_end = s + 1 < R ? c.chunk_start[lo + 1] : c.seg_start[e] + c.num_rows[e];
    if (r >= chunk_end) continue;  // padding row of expert e's segment
    const int entry = *p.ws.get_src_token_topk(e, s, r - c.chunk_start[lo]);
    const int t = entry / d.num_topk, k = entry % d.num_topk;
    const uint4* src = reinterpret_cast<const uint4*>(p.sym.map(p.ws.get_x(t), uint32_t(s)));
    uint4* dst = reinterpret_cast<uint4*>(p.ws.get_l1_pool_x(uint64_t(r)));
    // The row's scales (lane j holds scales j and j + 32: H / 128 <= 64, plan::kMegaMaxHidden) and top-k weight are
    // loaded with the row's first vectors, not after the row: one NVLink round trip (~1.5 us) for all, on the
    // critical path of a 1-token call.
    const int num_scales = d.hidden / 128;
    const float* src_scales = p.sym.map(p.ws.get_x_scales(t), uint32_t(s));
    const float scale_lo = lane < num_scales ? src_scales[lane] : 0.f;
    const float scale_hi = lane + 32 < num_scales ? src_scales[lane + 32] : 0.f;
    const float weight = lane == 0 ? *p.sym.map(p.ws.get_topk_weights(t) + k, uint32_t(s)) : 0.f;
    // kPullUnroll 16-byte loads in flight per lane before the stores: a peer's row arrives in H / (512 x unroll)
    // NVLink round trips instead of H / 512.
    constexpr int kPullUnroll = layout::MegaRoles::kDataRegisters >= 56 ? 4 : 2;  // 16 registers each
    const int row_vectors = d.hidden / 16;
#pragma unroll 1
    for (int j0 = lane; j0 < row_vectors; j0 += 32 * kPullUnroll) {
      uint4 v[kPullUnroll];
#pragma unroll
      for (int u = 0; u < kPullUnroll; ++u)
        if (j0 + 32 * u < row_vectors) v[u] = src[j0 + 32 * u];
#pragma unroll
      for (int u = 0; u < kPullUnroll; ++u)
        if (j0 + 32 * u < row_vectors) dst[j0 + 32 * u] = v[u];
    }
    if (lane < num_scales) *p.ws.get_l1_pool_scale(lane, uint64_t(r)) = scale_lo;
    if (lane + 32 < num_scales) *p.ws.get_l1_pool_scale(lane + 32, uint64_t(r)) = scale_hi;
    if (lane == 0) {
      *p.ws.get_l1_pool_weight(uint64_t(r)) = weight;
      *p.ws.get_l1_pool_src(uint64_t(r)) = layout::PoolRowSource{s, t, k, 0};
    }
    // Generic writes, read by TMA (async proxy) on any SM of this GPU after the acquire on the counter.
    ptx::fence_proxy_async_global();
    ptx::fence_acq_rel_gpu();
    __syncwarp();
    if (lane == 0) ptx::red_add_release_gpu(p.ws.get_l1_arrival_count(uint64_t(r / BLOCK_M)), 1u);
  }
}

}  // namespace symmoe::mega::kernel
