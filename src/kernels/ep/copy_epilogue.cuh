// Copy epilogue of dispatch (receiver side, after the barrier that publishes every source's records and counts):
// receive-side metadata (prefix sums over sources, per-expert unaligned/aligned counts and segment starts), then
// every received record -> the output rows (non-expand: row psum[s-1] + slot; expand: one row per local lane at
// start_e + rows of earlier sources for e + the lane's expert position carried in the record), identity metadata
// (recv_src_metadata) and the expand padding rows.
// Fresh dispatch derives everything from the exchanged counts; cached dispatch reads the handle's prefix sums and
// expand columns, so both produce the same rows (the golden model's order: source rank, then token).
// Rows move with bulk copies through the warp's staging buffers (record -> shared -> output rows; x and a 16-byte
// multiple scale row in one load, one store per output row from the lane that owns it), so a few warps per SM keep
// enough bytes in flight to run at HBM speed.
// NOTES: shared scratch needs R + E + 3 El ints (the dispatch kernel's counter area holds kNumWarps (R + E)).
#pragma once

#include "kernels/ep/common.cuh"
#include "kernels/ep/stager.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ep {

struct RecvMeta {
  int* psum_rank;     // [R] inclusive
  int* start;         // [El] exclusive prefix of aligned counts
  int* unaligned;     // [El]
  int* aligned;       // [El]
  int* expert_base;   // [R * El] fresh only: start[e] + rows of earlier sources for e
  int num_recv, num_expanded;
};

// Whole CTA. Builds RecvMeta in shared `scratch`; CTA 0 of a fresh dispatch writes the handle's receive fields.
__device__ __forceinline__ RecvMeta receive_metadata(const DispatchParams& p, int* scratch) {
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, El = dims.num_local_experts();
  RecvMeta m;
  m.psum_rank = scratch;
  m.start = m.psum_rank + R;
  m.unaligned = m.start + El;
  m.aligned = m.unaligned + El;
  m.expert_base = m.aligned + El;  // [R][El]
  if (!p.cached) {
    for (int i = threadIdx.x; i < R * El; i += blockDim.x)
      m.expert_base[i] = int(ptx::ld_acquire_sys(p.layout.get_recv_expert_count(i / El, i % El)));
    for (int s = threadIdx.x; s < R; s += blockDim.x)
      m.psum_rank[s] = int(ptx::ld_acquire_sys(p.layout.get_recv_rank_count(s)));
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

// One warp: x (and scales) of record rv -> output row `row` of every lane with row >= 0.
__device__ __forceinline__ void copy_payload(const DispatchParams& p, Stager& st, const layout::TokenRecordView& rv,
                                             int row, uint32_t rows_mask) {
  const layout::TokenRecord& rec = rv.rec;
  const uint32_t xb = uint32_t(p.x_row_bytes), sb = uint32_t(p.sf_row_bytes);
  const bool sf_bulk = sb % 16 == 0 && sb > 0;
  const uint32_t load_bytes = sf_bulk ? rec.scales_offset + sb : xb;
  const int b = st.acquire();
  if (lane_id() == 0) st.load(b, rv.record(), load_bytes, 0, load_bytes);
  st.wait_loaded(b);
  if (row >= 0) {
    ptx::bulk_store_shared_to_global(p.recv_x + int64_t(row) * xb, st.buffer(b), xb);
    if (sf_bulk) ptx::bulk_store_shared_to_global(p.recv_sf + int64_t(row) * sb, st.buffer(b) + rec.scales_offset, sb);
  }
  st.commit();
  if (sb && !sf_bulk)  // packed UE8M0 rows that are not 16-byte multiples: 4-byte generic copies
    for (uint32_t rest = rows_mask; rest; rest &= rest - 1) {
      const int dst_row = __shfl_sync(0xffffffffu, row, __ffs(rest) - 1);
      warp_copy4(p.recv_sf + int64_t(dst_row) * sb, reinterpret_cast<const uint8_t*>(rv.scales()), sb);
    }
}

// One warp: received row i (non-expand order) -> outputs.
__device__ __forceinline__ void place_received_row(const DispatchParams& p, Stager& st, const RecvMeta& m, int i) {
  const auto& dims = p.layout.dims();
  const int R = dims.num_ranks, K = dims.num_topk, El = dims.num_local_experts(), lane = lane_id();
  const int s = find_source(m.psum_rank, R, i);
  const int slot = i - (s == 0 ? 0 : m.psum_rank[s - 1]);
  const layout::TokenRecordView rv = p.layout.get_recv_token(s, slot);
  const int e = lane < K ? __ldcg(rv.topk_idx() + lane) : -1;
  const bool on_rank = e >= 0 && e / El == p.rank;
  const int local = on_rank ? e - p.rank * El : -1;
  const uint32_t lanes_here = __ballot_sync(0xffffffffu, on_rank);
  const int master = 31 - __clz(lanes_here);
  const int stride = 2 + K;
  int32_t* meta = p.handle.recv_src_metadata + int64_t(i) * stride;
  if (!p.expand) {
    if (lane < K) {
      p.recv_topk_idx[int64_t(i) * K + lane] = local;
      p.recv_topk_weights[int64_t(i) * K + lane] = __ldcg(rv.topk_weights() + lane);
    }
    if (!p.cached) {
      if (lane < K) meta[2 + lane] = -1;
      if (lane == 0) meta[0] = __ldcg(rv.src_token_global_idx()), meta[1] = s * K + master;
    }
    copy_payload(p, st, rv, lane == 0 ? i : -1, 1u);
    return;
  }
  int row = -1;
  if (on_rank) row = p.cached ? meta[2 + lane] : m.expert_base[s * El + local] + __ldcg(rv.expert_pos() + lane);
  if (!p.cached) {
    if (lane < K) meta[2 + lane] = row;
    if (lane == 0) meta[0] = __ldcg(rv.src_token_global_idx()), meta[1] = s * K + master;
  }
  if (on_rank) {
    p.recv_topk_idx[row] = local;
    p.recv_topk_weights[row] = __ldcg(rv.topk_weights() + lane);
  }
  copy_payload(p, st, rv, row, lanes_here);
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
__device__ __forceinline__ void copy_epilogue(const DispatchParams& p, Stager& st, int* scratch) {
  const RecvMeta m = receive_metadata(p, scratch);
  const int g = blockIdx.x * kNumWarps + warp_id(), num_warps = gridDim.x * kNumWarps;
  for (int i = g; i < m.num_recv; i += num_warps) place_received_row(p, st, m, i);
  if (p.expand)
    for (int el = g; el < p.layout.dims().num_local_experts(); el += num_warps) place_padding(p, m, el);
}

}  // namespace symmoe::ep
