// The deployment flags of the commands that take one MoE deployment (`plan`, `run`): --shape, --ranks, --tokens,
// accepting the same values everywhere (named_shape's shapes, MoeShape::validate's rank bound, the token bound of
// cli_common/limits.hpp); each command gives its own defaults and says what the flag means there.
#pragma once

#include <string>

#include "cli_common/command.hpp"
#include "cli_common/limits.hpp"

namespace symmoe::cli {

struct ShapeFlags {
  std::string shape, shape_help;
  std::string ranks, ranks_help;
  std::string tokens, tokens_help;
};

inline Args& add_shape_flags(Args& args, const ShapeFlags& f) {
  return args.option("shape", f.shape, f.shape_help)
      .choices({"flash", "pro", "v3", "tiny"})
      .option("ranks", f.ranks, f.ranks_help)
      .int_range(1, kMaxRanks)
      .option("tokens", f.tokens, f.tokens_help)
      .int_range(1, kMaxTokensPerRank);
}

}  // namespace symmoe::cli
