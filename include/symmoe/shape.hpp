// MoE layer shape: the model dimensions and the expert-parallel deployment (ranks, max tokens per rank).
// Standard shapes (docs/design.md §1.2): flash, pro, v3.
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

// Named model shapes; ranks and max tokens are filled by the caller.
inline MoeShape named_shape(const std::string& name, int num_ranks, int num_max_tokens_per_rank) {
  MoeShape s;
  if (name == "flash") {
    s.hidden = 4096, s.intermediate = 2048, s.num_experts = 256, s.num_topk = 6;
  } else if (name == "pro") {
    s.hidden = 7168, s.intermediate = 3072, s.num_experts = 384, s.num_topk = 6;
  } else if (name == "v3") {
    s.hidden = 7168, s.intermediate = 2048, s.num_experts = 256, s.num_topk = 8;
  } else if (name == "tiny") {  // small layer for CPU runs and quick GPU checks
    s.hidden = 256, s.intermediate = 256, s.num_experts = 16, s.num_topk = 4;
  } else {
    SYMMOE_FAIL("shape", "unknown shape '", name, "' (expected flash, pro, v3 or tiny)");
  }
  s.num_ranks = num_ranks;
  s.num_max_tokens_per_rank = num_max_tokens_per_rank;
  return s;
}

}  // namespace symmoe
