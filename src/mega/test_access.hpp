// Test-only access to a MegaMoe: a planted stall for tests/gpu/test_mega.cu (MegaErrors.StalledPeerIsNamed).
// Production calls never use it.
#pragma once

#include "symmoe/mega_moe.hpp"

namespace symmoe {

struct MegaTestAccess {
  // layer.forward(args) except that the kernel of global rank `rank` is not launched (its inputs are still copied
  // in), so its peers' waits time out naming it. Defined in src/mega/mega_moe.cpp with forward() itself.
  static std::vector<const uint16_t*> forward_without_launching(MegaMoe& layer, const std::vector<MoeForwardArgs>& args,
                                                                int rank);
};

}  // namespace symmoe
