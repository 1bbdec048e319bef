// Device helpers shared by the EP kernel roles: one warp's view of a token's top-k lanes, warp copies, warp scans.
// Convention: warp lane k < K holds top-k lane k of the token (K <= 32), so per-token questions ("which lane is
// the master of rank d?") are single warp votes.
#pragma once

#include <cstdint>

#include "kernels/common/scan.cuh"
#include "kernels/ep/params.hpp"

namespace symmoe::ep {

__device__ __forceinline__ int lane_id() { return threadIdx.x & 31; }
__device__ __forceinline__ int warp_id() { return threadIdx.x >> 5; }

// Top-k lane `lane_id()` of one token as a warp sees it.
struct LaneRoute {
  int64_t expert;  // as given (may be out of range on bad input)
  bool valid;      // expert in [0, E)
  int dst_rank;    // expert / El, -1 when not valid
  bool master;     // the highest lane whose expert lives on dst_rank
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

// 16-byte load: kCoherent for data written during this kernel (by peers or other SMs: L2, no L1/texture path),
// else the read-only path (inputs of the call).
template <bool kCoherent>
__device__ __forceinline__ int4 load16(const int4* p) {
  if constexpr (kCoherent)
    return __ldcg(p);
  else
    return __ldg(p);
}

// One warp: copies `bytes` (multiple of 16, 16-byte aligned) from `src` to every destination held by the lanes of
// `dst_mask` (lane j's `dst`: local or peer pointer). Each lane loads kCopyVecs 16-byte vectors (all in flight)
// before storing them to each destination, so a row is read once however many ranks receive it.
template <bool kCoherent>
__device__ __forceinline__ void warp_copy16_fanout(const uint8_t* src, uint32_t bytes, uint8_t* dst,
                                                   uint32_t dst_mask) {
  const int lane = lane_id();
  const auto* s = reinterpret_cast<const int4*>(src);
  const uint32_t n = bytes / 16;
  for (uint32_t base = 0; base < n; base += 32 * kCopyVecs) {
    int4 v[kCopyVecs];
#pragma unroll
    for (int u = 0; u < kCopyVecs; ++u) {
      const uint32_t i = base + u * 32 + lane;
      if (i < n) v[u] = load16<kCoherent>(s + i);
    }
    for (uint32_t rest = dst_mask; rest; rest &= rest - 1) {
      auto* d =
          reinterpret_cast<int4*>(__shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(dst), __ffs(rest) - 1));
#pragma unroll
      for (int u = 0; u < kCopyVecs; ++u) {
        const uint32_t i = base + u * 32 + lane;
        if (i < n) d[i] = v[u];
      }
    }
  }
}

// The same for `bytes` a multiple of 4 (scale rows of any packing; small).
template <bool kCoherent>
__device__ __forceinline__ void warp_copy4_fanout(const uint8_t* src, uint32_t bytes, uint8_t* dst, uint32_t dst_mask) {
  const auto* s = reinterpret_cast<const uint32_t*>(src);
  for (uint32_t base = 0; base < bytes / 4; base += 32) {
    const uint32_t i = base + lane_id();
    uint32_t v = 0;
    if (i < bytes / 4) v = kCoherent ? __ldcg(s + i) : __ldg(s + i);
    for (uint32_t rest = dst_mask; rest; rest &= rest - 1) {
      auto* d = reinterpret_cast<uint32_t*>(
          __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(dst), __ffs(rest) - 1));
      if (i < bytes / 4) d[i] = v;
    }
  }
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
    const int incl = symmoe::kernel::warp_inclusive_sum(v);
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
    const int incl = symmoe::kernel::warp_inclusive_sum(base + lane < n ? data[base + lane] : 0);
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
