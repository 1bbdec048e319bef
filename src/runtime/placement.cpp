// In-process rank placement: virtual ranks round-robin over the visible GPUs, each with its SM share.
#include "symmoe/runtime.hpp"

namespace symmoe {

std::vector<RankPlacement> place_ranks_in_process(int num_ranks, int num_devices, int sms_per_device) {
  SYMMOE_CHECK(num_ranks >= 1 && num_ranks <= int(layout::kMaxRanks), "runtime", "num_ranks must be in [1, ",
               layout::kMaxRanks, "], got ", num_ranks);
  SYMMOE_CHECK(num_devices >= 1, "runtime", "in-process ranks need at least one GPU, got ", num_devices);
  SYMMOE_CHECK(sms_per_device >= 1, "runtime", "sms_per_device must be >= 1, got ", sms_per_device);
  const int max_per_device = ceil_div(num_ranks, num_devices);
  // NOTES: CUDA maps streams onto 8 hardware queues by default; a 9th rank's stream would share a queue and its
  // kernel could wait behind a peer's persistent kernel that waits for it.
  SYMMOE_CHECK(max_per_device <= 8, "runtime", num_ranks, " ranks on ", num_devices, " GPU(s) put ", max_per_device,
               " ranks on one GPU; at most 8 are supported");
  SYMMOE_CHECK(sms_per_device / max_per_device >= 1, "runtime", max_per_device, " ranks per GPU need at least ",
               max_per_device, " SMs, the GPU has ", sms_per_device);
  std::vector<RankPlacement> out(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    auto& p = out[r];
    p.rank = r;
    p.device = r % num_devices;
    p.index_on_device = r / num_devices;
    p.ranks_on_device = num_ranks / num_devices + (p.device < num_ranks % num_devices ? 1 : 0);
    p.num_sms = sms_per_device / p.ranks_on_device;
  }
  return out;
}

}  // namespace symmoe
