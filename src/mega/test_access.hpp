// Test-only access to a MegaMoe: a planted stall for tests/gpu/test_mega.cu (MegaErrors.StalledPeerIsNamed).
// Production calls never use it.
#pragma once

#include "symmoe/mega_moe.hpp"

namespace symmoe {

struct MegaTestAccess {
  // From the next forward() on, the kernel of global rank `rank` is not launched (its inputs are still copied in), so
  // its peers' waits time out naming it; -1: every rank launches again. Defined in src/mega/mega_moe.cpp.
  static void skip_rank(MegaMoe& layer, int rank);
};

}  // namespace symmoe
