// Trace stamps of the fused kernel (trace_format.hpp). The kernel is instantiated with kTrace true only for
// traced calls (MegaParams::trace set), so the timed kernels carry no trace code. The traced kernels do not spill
// either (the build checks both): trace state is never kept live across a role (cta_trace below; producer.cuh).
#pragma once

#include "kernels/mega/params.hpp"
#include "kernels/ptx/sync.cuh"

namespace symmoe::mega::kernel {

// This CTA's trace words. NOTES: the CTA index is re-read at every use (ptx::ctaid_x_volatile): with blockIdx.x the
// compiler computed the CTA's trace address once at kernel entry and kept it live through every role, which
// spilled in the data warpgroup's few registers.
__device__ __forceinline__ unsigned long long* cta_trace(const MegaParams& p) {
  return p.trace + size_t(ptx::ctaid_x_volatile()) * kTraceWordsPerCta;
}

// Trace stamp of this CTA.
template <bool kTrace>
__device__ __forceinline__ void trace_stamp(const MegaParams& p, TracePoint point) {
  if constexpr (kTrace) cta_trace(p)[point] = ptx::globaltimer_ns();
}
template <bool kTrace>
__device__ __forceinline__ void trace_max_stamp(const MegaParams& p, TracePoint point) {
  if constexpr (kTrace) atomicMax(cta_trace(p) + point, ptx::globaltimer_ns());
}
// The rest: only inside `if constexpr (kTrace)`. Returns the previous value.
__device__ __forceinline__ unsigned long long trace_add(const MegaParams& p, TracePoint point, unsigned long long v) {
  return atomicAdd(cta_trace(p) + point, v);
}
__device__ __forceinline__ unsigned long long trace_read(const MegaParams& p, TracePoint point) {
  return cta_trace(p)[point];
}
// Word w of this CTA's tile record `slot` (slots past kTraceTileSlots are dropped).
__device__ __forceinline__ void trace_tile(const MegaParams& p, unsigned long long slot, TraceTileWord w,
                                           unsigned long long v) {
  if (slot < kTraceTileSlots) cta_trace(p)[kNumTracePoints + slot * kTraceTileWords + w] = v;
}

}  // namespace symmoe::mega::kernel
