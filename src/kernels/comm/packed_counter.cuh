// 64-bit packed counters: (arrivals << 32 | count). A producer adds (1 << 32) | n in one atomic, so a consumer
// that sees the expected number of arrivals also sees the complete count sum (no second flag, no torn read).
// NOTES: counts must stay below 2^32 per round; the consumer clears the counter in the same call, fenced by a
// final barrier (docs/design.md §4.5), so CUDA graphs can replay.
#pragma once

#include <cstdint>

#include "kernels/comm/timeout.cuh"
#include "symmoe/common.hpp"

namespace symmoe::comm {

SYMMOE_HD constexpr uint64_t pack_arrival(uint32_t count) { return (uint64_t(1) << 32) | count; }
SYMMOE_HD constexpr uint32_t packed_arrivals(uint64_t v) { return uint32_t(v >> 32); }
SYMMOE_HD constexpr uint32_t packed_count(uint64_t v) { return uint32_t(v); }

// Producer side (remote counter obtained through SymBuffer::map): release prior writes, add one arrival.
__device__ __forceinline__ void packed_arrive_sys(uint64_t* counter, uint32_t count) {
  ptx::red_add_release_sys(counter, pack_arrival(count));
}

// Consumer side: wait for `arrivals` arrivals; on success *value holds the packed word.
__device__ __forceinline__ bool packed_wait_arrivals(const layout::WaitContext& ctx, int peer, const uint64_t* counter,
                                                     uint32_t arrivals, uint64_t* value) {
  return wait_until(
      ctx, layout::WaitSite::kPackedCounter, peer, counter, arrivals,
      [&] { return *value = ptx::ld_acquire_sys(counter); },
      [&](uint64_t v) { return packed_arrivals(v) >= arrivals; });
}

}  // namespace symmoe::comm
