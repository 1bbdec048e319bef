// The shape flags of the commands that run or plan one MoE layer (`plan`, `run`, `bench moe`), accepting the same
// values everywhere: --shape (a preset of kNamedShapes, include/symmoe/shape.hpp) and --hidden, --intermediate,
// --experts, --topk (each replaces the preset's value, so any shape can be asked for); `plan` and `run` also take
// --ranks and --tokens (MoeShape::validate's rank bound, the token bound of limits.hpp). Each command gives its own
// defaults and says what a flag means there.
// A shape is checked before any GPU work: MoeShape::validate, then the planner of each layer the command will run
// (layer_problem): the planner holds the kernels' constraints (tile sizes, the fused kernel's hidden, intermediate
// and top-k limits), so a shape it cannot plan is refused with the planner's reason.
#pragma once

#include <string>

#include "cli_common/command.hpp"
#include "symmoe/plan.hpp"
#include "symmoe/shape.hpp"

namespace symmoe::cli {

// --shape (default `preset`) and the four dimension flags.
Args& add_model_shape_flags(Args& args, const std::string& preset, const std::string& shape_help);

struct ShapeFlags {
  std::string shape, shape_help;
  std::string ranks, ranks_help;
  std::string tokens, tokens_help;
};

// add_model_shape_flags, then --ranks and --tokens.
Args& add_shape_flags(Args& args, const ShapeFlags& f);

// The shape the flags ask for, with the deployment's ranks and max tokens per rank, validated (a bad one throws
// MoeShape::validate's error naming the dimension, expected and got).
struct ModelShape {
  MoeShape shape;
  std::string name;  // the preset's, or "H2048-I768-E128-K8" once a dimension flag is given (result lines' "shape")
};
ModelShape read_model_shape(const Args& args, const std::string& preset, int num_ranks, int num_max_tokens_per_rank);

enum class Layer { kComposed, kFused };
const char* layer_name(Layer layer);  // "composed", "fused"

// "" when the planner plans `layer` with `weights` for `shape` on `num_sms` SMs per rank, else its reason (the
// planner's message). Host only.
std::string layer_problem(const MoeShape& shape, Layer layer, plan::GemmWeights weights, int num_sms);

// Throws when layer_problem answers a reason: "<command>: shape <name> (<dims>) cannot run on the <layer> layer
// (<weights> weights): <reason>".
void require_layer_plans(const std::string& command, const ModelShape& shape, Layer layer, plan::GemmWeights weights,
                         int num_sms);

}  // namespace symmoe::cli
