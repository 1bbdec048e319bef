// `symmoe run` on the GPUs: the composed MoE layer on every rank, checked against the golden model on a sample of
// tokens, timed, and summarised (tools/cli/run_gpu.cpp). The CPU path stays in cmd_run.cpp.
#pragma once

#include <string>

#include "symmoe/reference/routing.hpp"
#include "symmoe/shape.hpp"

namespace symmoe::cli {

struct GpuRunOptions {
  MoeShape shape;  // num_ranks = EP ranks (in-process, round-robin over the visible GPUs)
  std::string shape_name;
  ref::RoutingOptions routing;
  int alignment = 128;
  float clamp = 0.f;
  int check_tokens = 4;  // tokens per rank compared with the golden model
  int reps = 20;         // timed repetitions
};

// Returns the process exit code: 0 when every check passed, 1 otherwise.
int run_gpu_layer(const GpuRunOptions& options);

}  // namespace symmoe::cli
