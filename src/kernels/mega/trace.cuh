// Trace stamps of the fused kernel (symmoe/mega_trace.hpp): no-ops unless MegaParams::trace is set.
#pragma once

#include "kernels/mega/params.hpp"
#include "kernels/ptx/sync.cuh"

namespace symmoe::mega::kernel {

// Trace stamp of this CTA (no-op when tracing is off).
__device__ __forceinline__ void trace_stamp(const MegaParams& p, TracePoint point) {
  if (p.trace) p.trace[blockIdx.x * kNumTracePoints + point] = ptx::globaltimer_ns();
}
__device__ __forceinline__ void trace_max_stamp(const MegaParams& p, TracePoint point) {
  if (p.trace) atomicMax(p.trace + blockIdx.x * kNumTracePoints + point, ptx::globaltimer_ns());
}
__device__ __forceinline__ void trace_add(const MegaParams& p, TracePoint point, unsigned long long v) {
  if (p.trace) atomicAdd(p.trace + blockIdx.x * kNumTracePoints + point, v);
}

}  // namespace symmoe::mega::kernel
