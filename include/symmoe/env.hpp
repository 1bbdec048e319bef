// The one place that reads environment overrides. Every knob is SYMMOE_<NAME>; callers pass NAME only.
// Known knobs (keep this list current):
//   SYMMOE_GPU_KIND     device kind recorded in benchmark results (e.g. nvidia-h200-x2)
//   SYMMOE_COMMIT       commit recorded in benchmark results
//   SYMMOE_TIMEOUT_MS   bound on every cross-rank wait before it reports the stalled peer (default 10000)
//   SYMMOE_UNIQUE_ID    multi-process bootstrap: NCCL unique id as 256 hex digits (runtime/bootstrap.cpp)
//   SYMMOE_BOOTSTRAP_DIR  multi-process bootstrap: directory where rank 0 publishes the id (`symmoe launch` sets it)
//   SYMMOE_BLOCK_M      planner: force BLOCK_M (tokens per tile: 16, 32, 64 or 128) of MegaMoE / grouped GEMM
//   SYMMOE_NUM_STAGES   planner: force the pipeline stages (must fit shared memory)
//   SYMMOE_EP_SMS       planner: force the SMs of EP dispatch and combine
//   SYMMOE_EP_SKIP      benchmark only: EP phases to leave out (bits of kernels/ep/params.hpp SkipPhase; outputs
//                       are wrong when set; `symmoe bench ep --skip` sets it per measurement)
//   SYMMOE_EXPERTS_PER_WAVE  planner: force MegaMoE experts per wave (must divide E / R)
#pragma once

#include <cstdlib>
#include <string>

#include "symmoe/common.hpp"

namespace symmoe::env {

inline const char* raw(const std::string& name) { return std::getenv(("SYMMOE_" + name).c_str()); }

inline std::string get_string(const std::string& name, const std::string& def) {
  const char* v = raw(name);
  return v && *v ? std::string(v) : def;
}

inline long long get_int(const std::string& name, long long def) {
  const char* v = raw(name);
  if (!v || !*v) return def;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  SYMMOE_CHECK(end && *end == '\0', "env", "SYMMOE_", name, " must be an integer, got '", v, "'");
  return x;
}

}  // namespace symmoe::env
