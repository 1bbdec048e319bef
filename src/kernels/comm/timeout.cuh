// THE bounded wait. Every cross-rank (and cross-CTA) spin in symmoe goes through wait_until(): it polls until the
// condition holds or the timeout (WaitContext::timeout_ns, %globaltimer) passes; on timeout it records
// (rank, site, peer, counter, expected, seen) in the host-mapped error area, raises this rank's error count so the
// rank's other waits give up too, and returns false. The caller then exits its kernel (no trap): the host reads
// the records and throws symmoe::PeerTimeout naming the stalled peer.
// NOTES: the timer and the abort flag are read every 64 polls, so the check costs nothing on the
// fast path. record_timeout is inlined on purpose: an out-of-line call gives every kernel a stack frame.
#pragma once

#include <cstdint>

#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/sync.cuh"
#include "symmoe/layout/sync.hpp"

namespace symmoe::comm {

// True once any wait of this rank timed out (the kernel should wind down).
__device__ __forceinline__ bool aborted(const layout::WaitContext& ctx) {
  return ptx::ld_relaxed_gpu(ctx.num_errors) != 0;
}

__device__ __forceinline__ void record_timeout(const layout::WaitContext& ctx, layout::WaitSite site, int peer,
                                               const void* counter, uint64_t expected, uint64_t seen,
                                               uint64_t elapsed_ns) {
  const uint32_t idx = ptx::atom_add_relaxed_gpu(ctx.num_errors, 1);
  if (idx >= layout::kMaxErrorRecords) return;  // counted, not stored
  layout::ErrorRecord* r = ctx.records + idx;
  r->rank = ctx.rank;
  r->site = uint32_t(site);
  r->peer = peer;
  r->counter = reinterpret_cast<uint64_t>(counter);
  r->expected = expected;
  r->seen = seen;
  r->elapsed_ns = elapsed_ns;
  ptx::fence_acq_rel_sys();
  ptx::st_relaxed_sys(&r->valid, 1u);
}

// Polls `load()` (returns uint64) until `done(value)`. Returns false after recording a timeout, or when another
// wait of this rank already timed out (then without a record of its own).
template <typename Load, typename Done>
__device__ __forceinline__ bool wait_until(const layout::WaitContext& ctx, layout::WaitSite site, int peer,
                                           const void* counter, uint64_t expected, Load load, Done done) {
  uint64_t seen = load();
  if (done(seen)) return true;
  const uint64_t start = ptx::globaltimer_ns();
  for (uint32_t iter = 1;; ++iter) {
    seen = load();
    if (done(seen)) return true;
    if ((iter & 63) == 0) {
      const uint64_t elapsed = ptx::globaltimer_ns() - start;
      if (aborted(ctx)) return false;
      if (elapsed > ctx.timeout_ns) {
        record_timeout(ctx, site, peer, counter, expected, seen, elapsed);
        return false;
      }
    }
  }
}

// Common case: a 32-bit flag or counter (acquire, sys scope) must equal `expected`.
__device__ __forceinline__ bool wait_eq_sys(const layout::WaitContext& ctx, layout::WaitSite site, int peer,
                                            const uint32_t* flag, uint32_t expected) {
  return wait_until(
      ctx, site, peer, flag, expected, [&] { return uint64_t(ptx::ld_acquire_sys(flag)); },
      [&](uint64_t v) { return uint32_t(v) == expected; });
}

// An mbarrier phase completed by copies from a peer (bulk loads of peer memory): bounded, names the peer.
__device__ __forceinline__ bool wait_mbarrier_parity(const layout::WaitContext& ctx, layout::WaitSite site, int peer,
                                                     uint64_t* bar, uint32_t parity) {
  return wait_until(
      ctx, site, peer, bar, parity, [&] { return uint64_t(ptx::mbarrier_try_wait_parity(bar, parity)); },
      [](uint64_t done) { return done != 0; });
}

}  // namespace symmoe::comm
