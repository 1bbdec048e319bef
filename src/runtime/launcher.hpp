// Process launcher behind `symmoe launch -n N -- cmd...`: starts N copies of a command with RANK, WORLD_SIZE,
// LOCAL_RANK and SYMMOE_BOOTSTRAP_DIR set (the multi-process backend's bootstrap), waits for all, and stops the
// others as soon as one fails or the timeout passes. No MPI, no Python.
#pragma once

#include <string>
#include <vector>

namespace symmoe::runtime {

struct LaunchOptions {
  int num_processes = 0;
  std::vector<std::string> command;  // "symmoe" as command[0] means this executable
  double timeout_s = 0;              // 0: no limit
  double grace_s = 5;                // SIGTERM -> SIGKILL delay when stopping the others
};

// Returns 0 when every process exited 0; otherwise the first failure's exit code (128 + signal for a signal),
// or 124 when the timeout stopped the run. Throws symmoe::Error on bad options or when a process cannot start.
int launch_processes(const LaunchOptions& options);

}  // namespace symmoe::runtime
