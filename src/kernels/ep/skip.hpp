// Phases the EP kernels can leave out, to time where their time goes (`symmoe bench ep --skip`). Compile-time only:
// the kernels take the mask as a template parameter (kSkip); the library instantiates kSkip = 0 (every phase), and
// the other masks are instantiated only in src/kernels/ep/bench/skip_kernels.cu, which only the CLI (the bench
// target) links. With a bit set the outputs are WRONG; the protocol (counts, barrier, arrival counts, flags) always
// runs, so no call can hang, and the handle metadata stays valid for later calls with the same routing.
#pragma once

#include <cstdint>

namespace symmoe::ep {

enum SkipPhase : uint32_t {
  kSkipRemoteRows = 1,    // dispatch: x / scale rows go to the local destination only
  kSkipScaleRows = 2,     // dispatch: no scale rows
  kSkipMetaRecords = 4,   // dispatch: no metadata records (the epilogue reads the previous call's)
  kSkipEpilogue = 8,      // dispatch: receivers wait for the arrival counts, then place nothing
  kSkipCombineRows = 16,  // combine: senders send weights and flags only
  kSkipReduce = 32,       // combine: reducers wait for (and reset) the flags, then add nothing
};
constexpr uint32_t kDispatchSkipMask = kSkipRemoteRows | kSkipScaleRows | kSkipMetaRecords | kSkipEpilogue;
constexpr uint32_t kCombineSkipMask = kSkipCombineRows | kSkipReduce;

}  // namespace symmoe::ep
