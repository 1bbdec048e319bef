// What a result line records about the software and the GPUs it ran on (docs/design.md §10.3): symmoe version
// and commit, NVIDIA driver, CUDA runtime, NCCL, and each visible GPU's SM clock and power draw. Collected once,
// at the start of `symmoe bench` (before any kernel runs), and added to every line of the run.
// NOTES: NVML is not linked (CI has no driver); the driver version, clocks and power come from `nvidia-smi`, and are
// null when it is missing or says [N/A].
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "result_line.hpp"

namespace symmoe::bench {

struct RunEnvironment {
  std::string version, commit;
  std::string gpu;                         // gpu_kind (result_line.hpp): SYMMOE_GPU_KIND or the GPUs' names
  std::optional<std::string> driver;       // NVIDIA driver, e.g. "570.124.06" (nvidia-smi)
  std::optional<std::string> cuda_driver;  // CUDA version the driver supports, e.g. "13.0"
  std::string cuda;                        // CUDA runtime linked into symmoe, e.g. "13.0"
  std::optional<std::string> nccl;         // NCCL library loaded at run time, e.g. "2.28.3"
  std::vector<std::optional<double>> sm_clock_mhz, power_w;  // per visible CUDA device, in device order
};

// Collected on the first call; the same values afterwards.
const RunEnvironment& run_environment();

// Adds version, commit, driver, cuda_driver, cuda, nccl, sm_clock_mhz, power_w.
void add_run_environment(JsonLine& line);

}  // namespace symmoe::bench
