// Device helpers shared by the EP kernel roles: one warp's view of a token's top-k lanes, warp copies, warp scans.
// Convention: warp lane k < K holds top-k lane k of the token (K <= 32), so per-token questions ("which lane is
// the master of rank d?") are single warp votes.
#pragma once

#include <cstdint>

#include "kernels/ep/params.hpp"

namespace symmoe::ep {

__device__ __forceinline__ int lane_id() { return threadIdx.x & 31; }
__device__ __forceinline__ int warp_id() { return threadIdx.x >> 5; }

// Top-k lane `lane_id()` of one token as a warp sees it.
struct LaneRoute {
  int64_t expert;   // as given (may be out of range on bad input)
  bool valid;       // expert in [0, E)
  int dst_rank;     // expert / El, -1 when not valid
  bool master;      // the highest lane whose expert lives on dst_rank
};

__device__ __forceinline__ LaneRoute route_lane(int64_t expert, int num_topk, int num_experts, int num_local) {
  const int lane = lane_id();
  LaneRoute r;
  r.expert = expert;
  r.valid = lane < num_topk && expert >= 0 && expert < num_experts;
  r.dst_rank = r.valid ? int(expert / num_local) : -1;
  const uint32_t same = __match_any_sync(0xffffffffu, r.valid ? r.dst_rank : -1 - lane);
  r.master = r.valid && (31 - __clz(same)) == lane;
  return r;
}

__device__ __forceinline__ int64_t load_expert(const int64_t* topk_idx, int token, int num_topk) {
  return lane_id() < num_topk ? topk_idx[int64_t(token) * num_topk + lane_id()] : int64_t(-1);
}

// Warp copy of `bytes` (multiple of 16, 16-byte aligned pointers) with L1-bypassing loads (data written by other
// SMs or ranks in this kernel). Four 16-byte vectors in flight per lane.
__device__ __forceinline__ void warp_copy16(uint8_t* dst, const uint8_t* src, uint32_t bytes) {
  const int lane = lane_id();
  auto* d = reinterpret_cast<int4*>(dst);
  const auto* s = reinterpret_cast<const int4*>(src);
  const uint32_t n = bytes / 16;
  uint32_t i = lane;
  for (; i + 96 < n; i += 128) {
    const int4 a = __ldcg(s + i), b = __ldcg(s + i + 32), c = __ldcg(s + i + 64), e = __ldcg(s + i + 96);
    d[i] = a, d[i + 32] = b, d[i + 64] = c, d[i + 96] = e;
  }
  for (; i < n; i += 32) d[i] = __ldcg(s + i);
}

// Warp copy of `bytes` (multiple of 4, 4-byte aligned): scale rows of any packing.
__device__ __forceinline__ void warp_copy4(uint8_t* dst, const uint8_t* src, uint32_t bytes) {
  auto* d = reinterpret_cast<uint32_t*>(dst);
  const auto* s = reinterpret_cast<const uint32_t*>(src);
  for (uint32_t i = lane_id(); i < bytes / 4; i += 32) d[i] = __ldcg(s + i);
}

__device__ __forceinline__ void warp_zero(uint8_t* dst, uint32_t bytes) {
  auto* d = reinterpret_cast<uint32_t*>(dst);
  for (uint32_t i = lane_id(); i < bytes / 4; i += 32) d[i] = 0;
}

// Exclusive (and total) prefix sum of n ints in shared memory, computed by ONE warp (n is small: R or El).
// out may alias in. Returns the total to every lane of the warp.
__device__ __forceinline__ int warp_exclusive_scan(const int* in, int* out, int n) {
  const int lane = lane_id();
  int carry = 0;
  for (int base = 0; base < n; base += 32) {
    const int v = base + lane < n ? in[base + lane] : 0;
    int incl = v;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += y;
    }
    if (base + lane < n) out[base + lane] = carry + incl - v;
    carry += __shfl_sync(0xffffffffu, incl, 31);
  }
  return carry;
}

// In-place inclusive prefix sum of n ints in shared memory, by ONE warp.
__device__ __forceinline__ void warp_inclusive_scan(int* data, int n) {
  const int lane = lane_id();
  int carry = 0;
  for (int base = 0; base < n; base += 32) {
    int incl = base + lane < n ? data[base + lane] : 0;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += y;
    }
    if (base + lane < n) data[base + lane] = carry + incl;
    carry += __shfl_sync(0xffffffffu, incl, 31);
  }
}

// Index of the source rank whose inclusive prefix range holds row i: number of psum entries <= i.
__device__ __forceinline__ int find_source(const int* psum_inclusive, int num_ranks, int row) {
  int count = 0;
  for (int base = 0; base < num_ranks; base += 32) {
    const int r = base + lane_id();
    count += __popc(__ballot_sync(0xffffffffu, r < num_ranks && psum_inclusive[r] <= row));
  }
  return count;
}

}  // namespace symmoe::ep
