// `symmoe run` on the GPUs: the MoE layer (composed pipeline, or with `fused` the single-kernel MegaMoe, then also
// checked bitwise against the composed one) on every rank, checked against the golden model on a sample of tokens,
// timed, and summarised (tools/cli/run_gpu.cpp). The CPU path stays in cmd_run.cpp.
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
  bool fused = false;    // false: ComposedMoe; true: MegaMoe (+ one composed call for the bitwise comparison)
};

// Returns the process exit code: 0 when every check passed, 1 otherwise.
int run_gpu_layer(const GpuRunOptions& options);

}  // namespace symmoe::cli
