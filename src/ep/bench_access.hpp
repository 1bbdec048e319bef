// Benchmark-only access to an EpBuffer: the phase-skipping kernels that bench/ep.cu --skip times (ep::SkipPhase,
// kernels/ep/skip.hpp; any non-zero mask gives wrong outputs). Production calls never use it.
#pragma once

#include <cstdint>

#include "kernels/ep/params.hpp"
#include "symmoe/ep.hpp"

namespace symmoe {

struct EpBenchAccess {
  // The buffer's dispatch / combine launchers from now on (nullptr: the library's, ep::launch_dispatch /
  // launch_combine). Defined in the library (src/ep/ep_buffer.cpp).
  static void set_launchers(EpBuffer& buffer, ep::DispatchLaunchFn dispatch, ep::CombineLaunchFn combine);
  // The launchers of the kernels compiled with skip mask `bits` (0: the library's). Defined only where the
  // phase-skipping kernels are compiled (src/kernels/ep/bench/skip_kernels.cu, linked into the CLI), so the
  // library carries none of them. Throws symmoe::Error for a mask with bits outside ep::SkipPhase.
  static void set_skip_phases(EpBuffer& buffer, uint32_t bits);
};

}  // namespace symmoe
