// Copy epilogue of dispatch (receiver side).
// receive_metadata (after the entry barrier, which publishes the counts; notify.cuh says why they stay valid to the
// end of the kernel): prefix sums over sources, per-expert unaligned/aligned counts and segment starts.
// copy_epilogue: a row of source s is placed once all of s's rows have landed here (recv_arrivals[s] reaches the
// count s sent; every lane that reads a row waits itself, an acquire, so no cross-lane ordering is needed):
//   non-expand: x and scales are already in their rows (senders pushed them there); per row only the metadata:
//               recv_topk_idx / recv_topk_weights (local ids) and recv_src_metadata. Several rows per warp at once
//               (lane groups of kGroup >= K lanes), so the per-row load latency overlaps.
//   expand:     each received row fans out to one output row per local lane (start_e + rows of earlier sources for
//               e + the lane's expert position carried in the record), plus identity metadata and padding rows.
// Fresh dispatch derives everything from the exchanged counts; cached dispatch reads the handle's prefix sums and
// expand columns, so both produce the same rows (the golden model's order: source rank, then token).
#pragma once

#include "kernels/comm/timeout.cuh"
#include "kernels/ep/common.cuh"
#include "kernels/ep/smem_layout.hpp"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ep {

struct RecvMeta {
  int* psum_rank;    // [R] inclusive
  int* start;        // [El] exclusive prefix of aligned counts
  int* unaligned;    // [El]
  int* aligned;      // [El]
  int* expert_base;  // [R * El] fresh only: start[e] + rows of earlier sources for e
  int num_recv, num_expanded;
};

// Whole CTA. Builds RecvMeta in its shared-memory regions (DispatchSmemLayout); CTA 0 of a fresh dispatch writes
// the handle's receive fields.
__device__ __forceinline__ RecvMeta receive_metadata(const DispatchParams& p, const DispatchSmemLayout& smem,
                                                     uint32_t parity) {
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, El = dims.num_local_experts();
  RecvMeta m;
  m.psum_rank = smem.recv_psum_rank();
  m.start = smem.recv_start();
  m.unaligned = smem.recv_unaligned();
  m.aligned = smem.recv_aligned();
  m.expert_base = smem.recv_expert_base();
  if (!p.cached) {
    for (int i = threadIdx.x; i < R * El; i += blockDim.x)
      m.expert_base[i] = int(__ldcg(p.layout.get_recv_expert_count(parity, i / El, i % El)));
    for (int s = threadIdx.x; s < R; s += blockDim.x)
      m.psum_rank[s] = int(__ldcg(p.layout.get_recv_rank_count(parity, s, p.rank)));
    __syncthreads();
    for (int el = threadIdx.x; el < El; el += blockDim.x) {
      int total = 0;
      for (int s = 0; s < R; ++s) {  // expert_base[s][el] := rows of sources < s (start added below)
        const int c = m.expert_base[s * El + el];
        m.expert_base[s * El + el] = total;
        total += c;
      }
      m.unaligned[el] = total;
      m.aligned[el] = (total + p.expert_alignment - 1) / p.expert_alignment * p.expert_alignment;
    }
  } else {
    for (int s = threadIdx.x; s < R; s += blockDim.x) m.psum_rank[s] = p.handle.psum_num_recv_tokens_per_rank[s];
    for (int el = threadIdx.x; el < El; el += blockDim.x) {
      m.unaligned[el] = p.handle.num_unaligned_recv_tokens_per_expert[el];
      m.aligned[el] = p.handle.num_recv_tokens_per_expert[el];
    }
  }
  __syncthreads();
  if (warp_id() == 0) {
    if (!p.cached) warp_inclusive_scan(m.psum_rank, R);  // counts -> inclusive prefix over sources
    warp_exclusive_scan(m.aligned, m.start, El);
  }
  __syncthreads();
  if (!p.cached)
    for (int i = threadIdx.x; i < R * El; i += blockDim.x) m.expert_base[i] += m.start[i % El];
  __syncthreads();
  m.num_recv = m.psum_rank[R - 1];
  m.num_expanded = m.start[El - 1] + m.aligned[El - 1];
  if (!p.cached && blockIdx.x == 0) {
    for (int s = threadIdx.x; s < R; s += blockDim.x) p.handle.psum_num_recv_tokens_per_rank[s] = m.psum_rank[s];
    for (int el = threadIdx.x; el < El; el += blockDim.x) {
      p.handle.num_unaligned_recv_tokens_per_expert[el] = m.unaligned[el];
      p.handle.num_recv_tokens_per_expert[el] = m.aligned[el];
      p.handle.psum_num_recv_tokens_per_expert[el] =
          p.expand ? m.start[el] + m.unaligned[el] : m.start[el] + m.aligned[el];
    }
    if (threadIdx.x == 0) {
      p.handle.device_counts[0] = m.num_recv;
      p.handle.device_counts[1] = m.num_expanded;
    }
  }
  return m;
}

// One lane: true once every row source s sent here has landed (bounded wait, acquire). landed: this lane's cache of
// sources already seen complete (s < 64).
__device__ __forceinline__ bool source_landed(const DispatchParams& p, const RecvMeta& m, int s, uint64_t& landed) {
  if (s < 64 && ((landed >> s) & 1u)) return true;
  const uint32_t expected = uint32_t(m.psum_rank[s] - (s == 0 ? 0 : m.psum_rank[s - 1]));
  const bool ok = comm::wait_eq_sys(p.wait, layout::WaitSite::kFlag, s, p.layout.get_recv_arrivals(s), expected);
  if (ok && s < 64) landed |= uint64_t(1) << s;
  return ok;
}

// Source rank whose inclusive prefix range holds row i (one lane, any lane: R is small, shared memory).
__device__ __forceinline__ int lane_find_source(const int* psum_inclusive, int num_ranks, int row) {
  int s = 0;
  while (s < num_ranks - 1 && psum_inclusive[s] <= row) ++s;
  return s;
}

// One warp, non-expand: the metadata of rows [i0, i0 + 32 / group) (group = lanes per row, a power of two >= K).
__device__ __forceinline__ bool place_metadata_rows(const DispatchParams& p, const RecvMeta& m, int i0, int group,
                                                    uint64_t& landed) {
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, K = dims.num_topk, El = dims.num_local_experts(), lane = lane_id();
  const int k = lane & (group - 1), i = i0 + lane / group;
  const bool row_ok = i < m.num_recv;
  const int s = row_ok ? lane_find_source(m.psum_rank, R, i) : 0;
  const int slot = row_ok ? i - (s == 0 ? 0 : m.psum_rank[s - 1]) : 0;
  const bool ok = !row_ok || source_landed(p, m, s, landed);
  if (!__all_sync(0xffffffffu, ok)) return false;
  const layout::TokenMetaView mv = p.layout.get_recv_meta(s, slot);
  const int e = row_ok && k < K ? __ldcg(mv.topk_idx() + k) : -1;
  const float w = row_ok && k < K ? __ldcg(mv.topk_weights() + k) : 0.f;
  const int src = row_ok && k == 0 ? __ldcg(mv.src_token_global_idx()) : 0;
  const bool on_rank = e >= 0 && e / El == p.rank;
  const uint32_t group_mask = (group == 32 ? 0xffffffffu : ((1u << group) - 1u)) << (lane & ~(group - 1));
  const uint32_t lanes_here = __ballot_sync(0xffffffffu, on_rank) & group_mask;
  const int master = lanes_here ? (31 - __clz(lanes_here)) - (lane & ~(group - 1)) : -1;
  if (!row_ok || k >= K) return true;
  p.recv_topk_idx[int64_t(i) * K + k] = on_rank ? e - p.rank * El : -1;
  p.recv_topk_weights[int64_t(i) * K + k] = w;
  if (!p.cached) {
    int32_t* meta = p.handle.recv_src_metadata + int64_t(i) * (2 + K);
    meta[2 + k] = -1;
    if (k == 0) meta[0] = src, meta[1] = s * K + master;
  }
  return true;
}

// One warp, expand: received row i -> one output row per local lane, metadata.
__device__ __forceinline__ bool place_expanded_row(const DispatchParams& p, const RecvMeta& m, int i,
                                                   uint64_t& landed) {
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, K = dims.num_topk, El = dims.num_local_experts(), lane = lane_id();
  const int s = find_source(m.psum_rank, R, i);
  const int slot = i - (s == 0 ? 0 : m.psum_rank[s - 1]);
  if (!__all_sync(0xffffffffu, source_landed(p, m, s, landed))) return false;
  const layout::TokenMetaView mv = p.layout.get_recv_meta(s, slot);
  const int e = lane < K ? __ldcg(mv.topk_idx() + lane) : -1;
  const bool on_rank = e >= 0 && e / El == p.rank;
  const int local = on_rank ? e - p.rank * El : -1;
  const uint32_t lanes_here = __ballot_sync(0xffffffffu, on_rank);
  const int master = 31 - __clz(lanes_here);
  int32_t* meta = p.handle.recv_src_metadata + int64_t(i) * (2 + K);
  int row = -1;
  if (on_rank) row = p.cached ? meta[2 + lane] : m.expert_base[s * El + local] + __ldcg(mv.expert_pos() + lane);
  if (!p.cached) {
    if (lane < K) meta[2 + lane] = row;
    if (lane == 0) meta[0] = __ldcg(mv.src_token_global_idx()), meta[1] = s * K + master;
  }
  if (on_rank) {
    p.recv_topk_idx[row] = local;
    p.recv_topk_weights[row] = __ldcg(mv.topk_weights() + lane);
  }
  const uint32_t xb = uint32_t(p.x_row_bytes), sb = uint32_t(p.sf_row_bytes);
  warp_copy16_fanout<true>(p.layout.get_recv_x_row(i), xb, on_rank ? p.recv_x + int64_t(row) * xb : nullptr,
                           lanes_here);
  if (sb)
    warp_copy4_fanout<true>(p.layout.get_recv_scales_row(i), sb, on_rank ? p.recv_sf + int64_t(row) * sb : nullptr,
                            lanes_here);
  return true;
}

// One warp: the padding rows of local expert el (expand only).
__device__ __forceinline__ void place_padding(const DispatchParams& p, const RecvMeta& m, int el) {
  const uint32_t xb = uint32_t(p.x_row_bytes), sb = uint32_t(p.sf_row_bytes);
  for (int row = m.start[el] + m.unaligned[el]; row < m.start[el] + m.aligned[el]; ++row) {
    if (lane_id() == 0) p.recv_topk_idx[row] = -1, p.recv_topk_weights[row] = 0.f;
    if (p.zero_padding) {
      warp_zero(p.recv_x + int64_t(row) * xb, xb);
      if (sb) warp_zero(p.recv_sf + int64_t(row) * sb, sb);
    }
  }
}

// Whole grid: every received row and padding row, warps strided over the grid.
__device__ __forceinline__ void copy_epilogue(const DispatchParams& p, const RecvMeta& m) {
  const int g = blockIdx.x * kNumWarps + warp_id(), num_warps = gridDim.x * kNumWarps;
  if (!p.expand) {
    const int K = p.layout.dims().num_topk;
    int group = 1;
    while (group < K) group <<= 1;
    const int rows_per_warp = 32 / group;
    uint64_t landed = 0;
    for (int i0 = g * rows_per_warp; i0 < m.num_recv; i0 += num_warps * rows_per_warp)
      if (!place_metadata_rows(p, m, i0, group, landed)) return;
    return;
  }
  uint64_t landed = 0;
  for (int i = g; i < m.num_recv; i += num_warps)
    if (!place_expanded_row(p, m, i, landed)) return;
  for (int el = g; el < p.layout.dims().num_local_experts(); el += num_warps) place_padding(p, m, el);
}

}  // namespace symmoe::ep
