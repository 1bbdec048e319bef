// MoE layer shape: the model dimensions and the expert-parallel deployment (ranks, max tokens per rank).
// Named shapes (kNamedShapes): the standard benchmark shapes (flash, pro, v3; docs/design.md §1.2), tiny, and public
// MoE models.
#pragma once

#include <cstdint>
#include <string>

#include "symmoe/common.hpp"

namespace symmoe {

struct MoeShape {
  int hidden = 0;                   // H
  int intermediate = 0;             // I (per expert; L1 produces 2*I gate/up columns)
  int num_experts = 0;              // E (global)
  int num_topk = 0;                 // K
  int num_ranks = 1;                // R
  int num_max_tokens_per_rank = 0;  // T_max, the same on every rank

  int num_local_experts() const { return num_experts / num_ranks; }

  // Throws symmoe::Error naming the first bad field.
  void validate() const {
    SYMMOE_CHECK(hidden > 0 && hidden % 128 == 0, "shape", "hidden must be a positive multiple of 128, got ", hidden);
    SYMMOE_CHECK(intermediate > 0 && intermediate % 128 == 0, "shape",
                 "intermediate must be a positive multiple of 128, got ", intermediate);
    SYMMOE_CHECK(num_ranks >= 1 && num_ranks <= 72, "shape", "num_ranks must be in [1, 72], got ", num_ranks);
    SYMMOE_CHECK(num_experts > 0 && num_experts % num_ranks == 0, "shape", "num_experts (", num_experts,
                 ") must be a positive multiple of num_ranks (", num_ranks, ")");
    SYMMOE_CHECK(num_topk >= 1 && num_topk <= 32 && num_topk <= num_experts, "shape",
                 "num_topk must be in [1, min(32, num_experts)], got ", num_topk);
    SYMMOE_CHECK(num_max_tokens_per_rank >= 1, "shape", "num_max_tokens_per_rank must be >= 1, got ",
                 num_max_tokens_per_rank);
  }

  std::string to_string() const {
    return detail::concat("H=", hidden, " I=", intermediate, " E=", num_experts, " K=", num_topk, " R=", num_ranks,
                          " T_max=", num_max_tokens_per_rank);
  }
};

// The named model shapes, the one list of them (the CLI's --shape, the Python named_shape / plan, the tests):
// the model's H, I, E, K; ranks and max tokens are the deployment's. Every entry passes MoeShape::validate at one
// rank; whether a layer can run it is the planner's answer (mixtral-8x7b: I = 14336 is past the fused kernel's
// intermediate limit, the composed layer runs it).
struct NamedShape {
  const char* name;
  const char* model;
  int hidden, intermediate, num_experts, num_topk;
};
inline constexpr NamedShape kNamedShapes[] = {
    {"flash", "standard shape Flash", 4096, 2048, 256, 6},
    {"pro", "standard shape Pro", 7168, 3072, 384, 6},
    {"v3", "standard shape V3 (DeepSeek-V3)", 7168, 2048, 256, 8},
    {"tiny", "small layer for CPU runs and quick GPU checks", 256, 256, 16, 4},
    {"qwen3-30b-a3b", "Qwen3-30B-A3B", 2048, 768, 128, 8},
    {"qwen3-235b-a22b", "Qwen3-235B-A22B", 4096, 1536, 128, 8},
    {"mixtral-8x7b", "Mixtral-8x7B", 4096, 14336, 8, 2},
};

// "flash, pro, v3, ..." in kNamedShapes order.
inline std::string named_shape_list() {
  std::string out;
  for (const NamedShape& n : kNamedShapes) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

// The named shape with the given ranks and max tokens per rank (not validated: the caller's deployment may be bad).
inline MoeShape named_shape(const std::string& name, int num_ranks, int num_max_tokens_per_rank) {
  for (const NamedShape& n : kNamedShapes)
    if (name == n.name) {
      MoeShape s;
      s.hidden = n.hidden, s.intermediate = n.intermediate, s.num_experts = n.num_experts, s.num_topk = n.num_topk;
      s.num_ranks = num_ranks, s.num_max_tokens_per_rank = num_max_tokens_per_rank;
      return s;
    }
  SYMMOE_FAIL("shape", "unknown shape '", name, "' (expected one of ", named_shape_list(), ")");
}

}  // namespace symmoe
