#include "cli_common/shape_flags.hpp"

#include "cli_common/limits.hpp"

namespace symmoe::cli {

namespace {
// The largest dimension a flag accepts; MoeShape::validate and the planner say what is runnable.
constexpr int kMaxDimension = 1 << 20;

struct DimensionFlag {
  const char* flag;
  int MoeShape::*field;
  const char* help;
};
constexpr DimensionFlag kDimensionFlags[] = {
    {"hidden", &MoeShape::hidden, "H, model width (a multiple of 128); replaces the --shape preset's"},
    {"intermediate", &MoeShape::intermediate,
     "I, one expert's intermediate width (a multiple of 128); replaces the --shape preset's"},
    {"experts", &MoeShape::num_experts, "E, experts in all (a multiple of the ranks); replaces the --shape preset's"},
    {"topk", &MoeShape::num_topk, "K, experts per token (<= E); replaces the --shape preset's"},
};

// The message of a symmoe::Error without its "symmoe[component] " prefix and " (at file:line)" suffix.
std::string message_of(const Error& e) {
  std::string m = e.what();
  const std::string prefix = "symmoe[" + e.component() + "] ", suffix = " (at " + e.site() + ")";
  if (m.rfind(prefix, 0) == 0) m.erase(0, prefix.size());
  if (m.size() >= suffix.size() && m.compare(m.size() - suffix.size(), suffix.size(), suffix) == 0)
    m.erase(m.size() - suffix.size());
  return m;
}

Args& add_preset_flag(Args& args, const std::string& preset, const std::string& shape_help) {
  std::vector<std::string> names;
  for (const NamedShape& n : kNamedShapes) names.push_back(n.name);
  return args.option("shape", preset, shape_help).choices(names);
}

Args& add_dimension_flags(Args& args) {
  for (const DimensionFlag& d : kDimensionFlags) args.option(d.flag, "", d.help).int_range(1, kMaxDimension);
  return args;
}
}  // namespace

Args& add_model_shape_flags(Args& args, const std::string& preset, const std::string& shape_help) {
  return add_dimension_flags(add_preset_flag(args, preset, shape_help));
}

Args& add_shape_flags(Args& args, const ShapeFlags& f) {
  add_preset_flag(args, f.shape, f.shape_help)
      .option("ranks", f.ranks, f.ranks_help)
      .int_range(1, kMaxRanks)
      .option("tokens", f.tokens, f.tokens_help)
      .int_range(1, kMaxTokensPerRank);
  return add_dimension_flags(args);
}

ModelShape read_model_shape(const Args& args, const std::string& preset, int num_ranks, int num_max_tokens_per_rank) {
  ModelShape m;
  m.name = args.has("shape") ? args.str("shape") : preset;
  m.shape = named_shape(m.name, num_ranks, num_max_tokens_per_rank);
  bool custom = false;
  for (const DimensionFlag& d : kDimensionFlags)
    if (args.has(d.flag)) m.shape.*d.field = args.integer(d.flag), custom = true;
  if (custom)
    m.name = detail::concat("H", m.shape.hidden, "-I", m.shape.intermediate, "-E", m.shape.num_experts, "-K",
                            m.shape.num_topk);
  m.shape.validate();
  return m;
}

const char* layer_name(Layer layer) { return layer == Layer::kFused ? "fused" : "composed"; }

std::string layer_problem(const MoeShape& shape, Layer layer, plan::GemmWeights weights, int num_sms) {
  const plan::PlanOverrides none;  // the kernels' constraints, not this environment's overrides
  try {
    shape.validate();
    if (layer == Layer::kFused) {
      plan::plan_mega_moe(shape, num_sms, none, weights);
      return "";
    }
    plan::plan_ep(shape, layout::TokenDtype::kFp8E4m3, num_sms, none);
    const double m = plan::expected_tokens_per_expert(shape, shape.num_max_tokens_per_rank);
    const int El = shape.num_local_experts();
    plan::plan_grouped_gemm(m, 2 * shape.intermediate, shape.hidden, El, num_sms, plan::GemmEpilogue::kSwigluFp8, none,
                            {}, weights);
    plan::plan_grouped_gemm(m, shape.hidden, shape.intermediate, El, num_sms, plan::GemmEpilogue::kBf16, none, {},
                            weights);
    return "";
  } catch (const Error& e) {
    return message_of(e);
  }
}

void require_layer_plans(const std::string& command, const ModelShape& shape, Layer layer, plan::GemmWeights weights,
                         int num_sms) {
  const std::string problem = layer_problem(shape.shape, layer, weights, num_sms);
  SYMMOE_CHECK(problem.empty(), "cli", command, ": shape ", shape.name, " (", shape.shape.to_string(),
               ") cannot run on the ", layer_name(layer), " layer (", plan::gemm_weights_name(weights),
               " weights): ", problem);
}

}  // namespace symmoe::cli
