// Trace stamps of the fused kernel (symmoe/mega_trace.hpp). The kernel is instantiated with kTrace true only for
// traced calls (MegaParams::trace set), so the timed kernels carry no trace code (the data warpgroup's few registers,
// MegaRoles::kDataRegisters, do not hold it: tools/ptxas-known-spills.txt lists the traced kernels' spills).
#pragma once

#include "kernels/mega/params.hpp"
#include "kernels/ptx/sync.cuh"

namespace symmoe::mega::kernel {

// Trace stamp of this CTA.
template <bool kTrace>
__device__ __forceinline__ void trace_stamp(const MegaParams& p, TracePoint point) {
  if constexpr (kTrace) p.trace[blockIdx.x * kTraceWordsPerCta + point] = ptx::globaltimer_ns();
}
template <bool kTrace>
__device__ __forceinline__ void trace_max_stamp(const MegaParams& p, TracePoint point) {
  if constexpr (kTrace) atomicMax(p.trace + blockIdx.x * kTraceWordsPerCta + point, ptx::globaltimer_ns());
}
// The rest: only inside `if constexpr (kTrace)`. Returns the previous value.
__device__ __forceinline__ unsigned long long trace_add(const MegaParams& p, TracePoint point, unsigned long long v) {
  return atomicAdd(p.trace + blockIdx.x * kTraceWordsPerCta + point, v);
}
__device__ __forceinline__ unsigned long long trace_read(const MegaParams& p, TracePoint point) {
  return p.trace[blockIdx.x * kTraceWordsPerCta + point];
}
// Word w of this CTA's tile record `slot` (slots past kTraceTileSlots are dropped).
__device__ __forceinline__ void trace_tile(const MegaParams& p, unsigned long long slot, TraceTileWord w,
                                           unsigned long long v) {
  if (slot < kTraceTileSlots) p.trace[blockIdx.x * kTraceWordsPerCta + kNumTracePoints + slot * kTraceTileWords + w] = v;
}

}  // namespace symmoe::mega::kernel
