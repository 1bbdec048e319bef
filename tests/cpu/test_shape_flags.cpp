// The shape flags of plan / run / bench moe (src/cli_common/shape_flags.hpp): every named shape plans, the
// dimension flags give any shape, and a shape a layer cannot run is refused before any work with the planner's
// reason (which dimension, expected vs got).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_common/shape_flags.hpp"
#include "common/compare.hpp"
#include "symmoe/common.hpp"

namespace symmoe {
namespace {

using cli::Layer;
using plan::GemmWeights;

constexpr int kSms = plan::hopper::kDefaultNumSms;

// The shape flags of `plan`, parsed from `words`.
cli::ModelShape parse_shape(std::vector<std::string> words, int ranks = 8, int tokens = 64) {
  cli::Args a("plan", "test command");
  cli::add_shape_flags(
      a, {.shape = "v3", .shape_help = "", .ranks = "8", .ranks_help = "", .tokens = "64", .tokens_help = ""});
  std::vector<char*> argv;
  static char cmd[] = "plan";
  argv.push_back(cmd);
  for (auto& w : words) argv.push_back(w.data());
  a.parse(int(argv.size()), argv.data());
  return cli::read_model_shape(a, "v3", ranks, tokens);
}

using test::error_of;

MoeShape shape_of(int hidden, int intermediate, int experts, int topk, int ranks = 8, int tokens = 64) {
  MoeShape s;
  s.hidden = hidden, s.intermediate = intermediate, s.num_experts = experts, s.num_topk = topk;
  s.num_ranks = ranks, s.num_max_tokens_per_rank = tokens;
  return s;
}

TEST(ShapeFlags, EveryNamedShapePlans) {
  for (const NamedShape& n : kNamedShapes)
    for (const int ranks : {1, 2, 8})
      for (const int tokens : {1, 128, 4096}) {
        const MoeShape s = named_shape(n.name, ranks, tokens);
        SCOPED_TRACE(std::string(n.name) + " " + s.to_string());
        EXPECT_NO_THROW(s.validate());
        for (const GemmWeights w : {GemmWeights::kFp8, GemmWeights::kFp4}) {
          EXPECT_EQ(cli::layer_problem(s, Layer::kComposed, w, kSms), "");
          const std::string fused = cli::layer_problem(s, Layer::kFused, w, kSms);
          if (std::string(n.name) == "mixtral-8x7b")  // I = 14336: past the fused kernel's intermediate limit
            EXPECT_NE(fused.find("intermediate 14336 exceeds 8192"), std::string::npos) << fused;
          else
            EXPECT_EQ(fused, "");
        }
      }
}

TEST(ShapeFlags, PresetsHoldTheModelsDimensions) {
  const MoeShape q30 = named_shape("qwen3-30b-a3b", 8, 1), q235 = named_shape("qwen3-235b-a22b", 8, 1),
                 mix = named_shape("mixtral-8x7b", 8, 1);
  EXPECT_EQ(q30.to_string(), shape_of(2048, 768, 128, 8, 8, 1).to_string());
  EXPECT_EQ(q235.to_string(), shape_of(4096, 1536, 128, 8, 8, 1).to_string());
  EXPECT_EQ(mix.to_string(), shape_of(4096, 14336, 8, 2, 8, 1).to_string());
  EXPECT_NE(error_of([] { named_shape("qwen3", 1, 1); })
                .find("unknown shape 'qwen3' (expected one of flash, pro, "
                      "v3, tiny, qwen3-30b-a3b, qwen3-235b-a22b, mixtral-8x7b)"),
            std::string::npos);
}

TEST(ShapeFlags, DimensionFlagsGiveAnyShape) {
  const cli::ModelShape preset = parse_shape({"--shape", "qwen3-235b-a22b"});
  EXPECT_EQ(preset.name, "qwen3-235b-a22b");
  EXPECT_EQ(preset.shape.to_string(), shape_of(4096, 1536, 128, 8).to_string());
  const cli::ModelShape custom =
      parse_shape({"--hidden", "2048", "--intermediate", "768", "--experts", "128", "--topk", "8"});
  EXPECT_EQ(custom.name, "H2048-I768-E128-K8");
  EXPECT_EQ(custom.shape.to_string(), shape_of(2048, 768, 128, 8).to_string());
  // A dimension flag replaces the preset's value only.
  const cli::ModelShape one = parse_shape({"--shape", "mixtral-8x7b", "--intermediate", "4096"});
  EXPECT_EQ(one.name, "H4096-I4096-E8-K2");
  EXPECT_EQ(cli::layer_problem(one.shape, Layer::kFused, GemmWeights::kFp8, kSms), "");
}

TEST(ShapeFlags, BadShapesAreRefusedWithTheReason) {
  const struct {
    std::vector<std::string> words;
    const char* reason;
  } cases[] = {
      {{"--hidden", "2000"}, "hidden must be a positive multiple of 128, got 2000"},
      {{"--intermediate", "100"}, "intermediate must be a positive multiple of 128, got 100"},
      {{"--experts", "100"}, "num_experts (100) must be a positive multiple of num_ranks (8)"},
      {{"--experts", "8", "--topk", "9"}, "num_topk must be in [1, min(32, num_experts)], got 9"},
      {{"--topk", "33"}, "num_topk must be in [1, min(32, num_experts)], got 33"},
      {{"--hidden", "0"}, "--hidden expects an integer in [1, 1048576], got '0'"},
      {{"--shape", "mixtral"}, "--shape expects one of flash, pro, v3, tiny, qwen3-30b-a3b"},
  };
  for (const auto& c : cases) {
    const std::string e = error_of([&] { parse_shape(c.words); });
    EXPECT_NE(e.find(c.reason), std::string::npos) << "got: " << e;
  }
}

TEST(ShapeFlags, TheFusedKernelsLimitsAreTheFusedLayersOnly) {
  const struct {
    MoeShape shape;
    const char* reason;
  } cases[] = {
      {shape_of(8192 + 128, 2048, 64, 8), "hidden 8320 exceeds the fused kernel's 8192"},
      {shape_of(4096, 8192 + 128, 64, 8), "intermediate 8320 exceeds 8192"},
      {shape_of(4096, 2048, 64, 9), "top-k 9 exceeds the fused kernel's 8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.shape.to_string());
    EXPECT_EQ(cli::layer_problem(c.shape, Layer::kComposed, GemmWeights::kFp8, kSms), "");
    const std::string fused = cli::layer_problem(c.shape, Layer::kFused, GemmWeights::kFp8, kSms);
    EXPECT_NE(fused.find(c.reason), std::string::npos) << fused;
    const cli::ModelShape m{c.shape, "custom"};
    const std::string e =
        error_of([&] { cli::require_layer_plans("symmoe run", m, Layer::kFused, GemmWeights::kFp8, kSms); });
    EXPECT_NE(e.find("symmoe run: shape custom (" + c.shape.to_string() +
                     ") cannot run on the fused layer (fp8 "
                     "weights): "),
              std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace symmoe
