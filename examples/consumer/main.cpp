// Uses an installed symmoe through its umbrella header: plans the fused layer for one deployment and runs the golden
// model's dispatch on two simulated ranks. No GPU needed.
#include <symmoe/symmoe.hpp>

#include <cstdio>
#include <vector>

int main() {
  std::printf("symmoe %s (commit %s, %s)\n", symmoe::kVersion, symmoe::kGitCommit,
              symmoe::kWithCuda ? "with CUDA" : "CPU-only");

  // The fused layer's launch plan for DeepSeek-V3 on 8 ranks, 4096 tokens per rank, 132 SMs, with the SYMMOE_*
  // overrides of this environment (PlanOverrides{} plans without them).
  const symmoe::MoeShape shape = symmoe::named_shape("v3", 8, 4096);
  shape.validate();
  const symmoe::plan::MegaPlan plan = symmoe::plan::plan_mega_moe(shape, 132, symmoe::plan::PlanOverrides::from_env());
  std::printf("MegaMoE plan: %s\n", plan.to_string().c_str());

  // The golden model: a tiny layer on 2 ranks, dispatched with the full routing metadata.
  const symmoe::MoeShape tiny = symmoe::named_shape("tiny", 2, 8);
  symmoe::ref::RoutingOptions routing;
  std::vector<symmoe::ref::DispatchInput> inputs;
  for (int r = 0; r < tiny.num_ranks; ++r)
    inputs.push_back(symmoe::ref::make_dispatch_input(symmoe::ref::make_random_layer_input(tiny, 8, routing, r)));
  symmoe::ref::DispatchConfig config;
  config.num_ranks = tiny.num_ranks, config.num_experts = tiny.num_experts, config.num_topk = tiny.num_topk;
  config.num_max_tokens_per_rank = tiny.num_max_tokens_per_rank;
  const auto outputs = symmoe::ref::dispatch(config, inputs);
  const std::string problems = symmoe::ref::check_dispatch(config, inputs, outputs);
  for (int r = 0; r < tiny.num_ranks; ++r)
    std::printf("golden model: rank %d received %d rows\n", r, outputs[r].handle.num_recv_tokens);
  std::printf("dispatch invariants: %s\n", problems.empty() ? "ok" : problems.c_str());
  return problems.empty() ? 0 : 1;
}
