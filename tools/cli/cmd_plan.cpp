// `symmoe plan`: the launch plans (EP, grouped GEMM L1/L2, MegaMoE) and every buffer region of one deployment.
#include <cstdio>
#include <optional>
#include <string>

#include "cli_common/command.hpp"
#include "cli_common/limits.hpp"
#include "cli_common/shape_flags.hpp"
#include "symmoe/plan.hpp"
#include "symmoe/plan_hybrid.hpp"

namespace {

using namespace symmoe;

// Plans print as one line of " | "-separated groups; one group per line reads better in a terminal.
void print_plan(const char* title, const std::string& line) {
  std::string out = line;
  for (size_t pos = 0; (pos = out.find(" | ", pos)) != std::string::npos;) out.replace(pos, 3, "\n    ");
  std::printf("%s\n    %s\n", title, out.c_str());
}

// `--nodes N`: the hybrid (scale-out) plan of this deployment, then the EP16-EP256 sweep next to DeepEP's published
// inter-node numbers (plan_hybrid.hpp). The per-rank kernel plans above are NVLink-only and not printed here.
int run_hybrid_plan(const cli::Args& args, layout::TokenDtype dtype) {
  const cli::ModelShape model = cli::read_model_shape(args, "v3", args.integer("ranks"), args.integer("tokens"));
  const MoeShape& shape = model.shape;
  const plan::HybridPlan hybrid =
      plan::plan_hybrid(plan::HybridDims::from_shape(shape, args.integer("nodes"), dtype, args.integer("node-limit")));
  std::printf("symmoe plan --nodes %d: %s (%s)\n\n", args.integer("nodes"), model.name.c_str(),
              shape.to_string().c_str());
  print_plan("Hybrid EP dispatch/combine (network hop to the same local rank, then NVLink):", hybrid.to_string());
  const int node_limit = args.integer("node-limit");
  std::printf("\nSweep: %s, 8 GPUs per node, %s dispatch, node limit %d (0 = none)\n%s", model.name.c_str(),
              layout::token_dtype_name(dtype), node_limit,
              plan::format_hybrid_sweep(shape, {128, 4096, 8192}, dtype, node_limit).c_str());
  return 0;
}

int run_plan(int argc, char** argv) {
  const cli::GpuLimits gpu = cli::gpu_limits();
  cli::Args args("plan", "Print the launch plans and the per-rank buffer layouts for one MoE deployment.");
  cli::add_shape_flags(args, {.shape = "v3",
                              .shape_help = "model shape preset",
                              .ranks = "8",
                              .ranks_help = "expert-parallel ranks R (E % R == 0)",
                              .tokens = "4096",
                              .tokens_help = "max tokens per rank T_max (the plans are for full batches)"})
      .option("sms", std::to_string(gpu.num_sms),
              "SMs per rank (132 on H100 SXM / H200; at most those of " + gpu.name + ")")
      .int_range(1, gpu.num_sms)
      .option("dispatch-dtype", "fp8", "EP dispatch payload: fp8 (E4M3 + scales) or bf16")
      .choices({"fp8", "bf16"})
      .option("nodes", "1", "nodes N (ranks / N GPUs each): given, prints the hybrid scale-out plan instead")
      .int_range(1, cli::kMaxRanks)
      .option("node-limit", "0", "with --nodes: max distinct nodes per token (DeepSeek-V3 routing: 4); 0 = none")
      .int_range(0, cli::kMaxRanks);
  if (!args.parse(argc, argv)) return 0;

  const std::string dtype_name = args.str("dispatch-dtype");
  const auto dtype = dtype_name == "fp8" ? layout::TokenDtype::kFp8E4m3 : layout::TokenDtype::kBf16;
  if (args.has("nodes")) return run_hybrid_plan(args, dtype);
  SYMMOE_CHECK(!args.has("node-limit"), "cli", "--node-limit needs --nodes");

  const cli::ModelShape model = cli::read_model_shape(args, "v3", args.integer("ranks"), args.integer("tokens"));
  const MoeShape& shape = model.shape;
  const int num_sms = args.integer("sms");
  cli::require_layer_plans("symmoe plan", model, cli::Layer::kComposed, plan::GemmWeights::kFp8, num_sms);
  const plan::PlanOverrides overrides = plan::PlanOverrides::from_env();

  const plan::EpPlan ep = plan::plan_ep(shape, dtype, num_sms, overrides);
  const double m = plan::expected_tokens_per_expert(shape, shape.num_max_tokens_per_rank);
  const int local_experts = shape.num_local_experts();
  const plan::GemmPlan l1 = plan::plan_grouped_gemm(m, 2 * shape.intermediate, shape.hidden, local_experts, num_sms,
                                                    plan::GemmEpilogue::kSwigluFp8, overrides);
  const plan::GemmPlan l2 = plan::plan_grouped_gemm(m, shape.hidden, shape.intermediate, local_experts, num_sms,
                                                    plan::GemmEpilogue::kBf16, overrides);

  std::printf("symmoe plan: %s (%s), %d SMs per rank, overrides: %s\n", model.name.c_str(), shape.to_string().c_str(),
              num_sms, overrides.to_string().c_str());
  std::printf("expected tokens per expert (T*R*K/E): %.3f; x%d imbalance: %.3f\n\n", m, plan::kImbalanceFactor,
              m * plan::kImbalanceFactor);
  print_plan("EP dispatch/combine:", ep.to_string());
  print_plan("Grouped GEMM L1 (composed path, [2I x H] with SwiGLU + FP8 epilogue):", l1.to_string());
  print_plan("Grouped GEMM L2 (composed path, [H x I], bf16 out):", l2.to_string());
  std::optional<plan::MegaPlan> mega;  // the FP8 plan sizes the workspace (FP4's shares it)
  for (const plan::GemmWeights w : {plan::GemmWeights::kFp8, plan::GemmWeights::kFp4}) {
    const std::string title = std::string("MegaMoE (fused layer, ") + plan::gemm_weights_name(w) + " weights):";
    const std::string problem = cli::layer_problem(shape, cli::Layer::kFused, w, num_sms);
    if (!problem.empty()) {
      std::printf("%s\n    not available for this shape: %s\n", title.c_str(), problem.c_str());
      continue;
    }
    const plan::MegaPlan p = plan::plan_mega_moe(shape, num_sms, overrides, w);
    print_plan(title.c_str(), p.to_string());
    if (!mega) mega = p;
  }
  std::printf("\n");

  const layout::EpLayout ep_layout(ep.dims());
  const uint64_t mega_bytes = mega ? layout::MegaLayout(mega->dims()).num_bytes() : 0;
  std::printf("%s\n", plan::format_regions("EP buffer (per rank, symmetric):", ep_layout.regions()).c_str());
  if (mega)
    std::printf("%s\n", plan::format_regions("MegaMoE workspace (per rank, symmetric):",
                                             layout::MegaLayout(mega->dims()).regions())
                            .c_str());
  std::printf("Totals per rank: EP buffer %s, MegaMoE workspace %s, both %s\n",
              plan::format_bytes(ep_layout.num_bytes()).c_str(), mega ? plan::format_bytes(mega_bytes).c_str() : "-",
              plan::format_bytes(ep_layout.num_bytes() + mega_bytes).c_str());
  const std::string warning = cli::memory_warning(ep_layout.num_bytes() + mega_bytes, gpu);
  if (!warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
  return 0;
}

}  // namespace

SYMMOE_CLI_COMMAND(plan, "plan", "launch plans (EP, GEMM, MegaMoE) and per-rank buffer layouts for a shape", run_plan);
