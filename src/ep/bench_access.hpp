// Benchmark-only access to an EpBuffer: the phase-skip bits that bench/ep.cu --skip times (ep::SkipPhase,
// kernels/ep/params.hpp; any non-zero value gives wrong outputs). Production calls never set them.
#pragma once

#include <cstdint>

#include "symmoe/ep.hpp"

namespace symmoe {

struct EpBenchAccess {
  static void set_skip_phases(EpBuffer& buffer, uint32_t bits);
};

}  // namespace symmoe
