// GPU tests of the fused MoE layer with FP4 E2M1 weights (MegaMoe on MoeRankWeights::format kFp4,
// include/symmoe/mega_moe.hpp; the kernel: src/kernels/mega/mega_kernel.cuh with kFp4). Own binary so that it can
// run alone under a timeout: build/gpu_test_mega_fp4 --gtest_brief=1.
//
// What is compared, on fresh random inputs (uniform / Zipf / hot expert / 30% masked lanes with an explicit
// all-masked token; 1, 8 and 128 tokens per rank; 1 rank, one rank per GPU, 8 virtual ranks):
// - fused FP4 vs composed FP4 (ComposedMoe on the same FP4 store): BITWISE on every token of every rank (the reasons
//   of test_mega.cu's header, plus: both FP4 paths upconvert with the same converter, tables and fold, so the
//   WGMMA reads the same E4M3 tiles);
// - fused FP4 vs composed FP8 on the folded experts (the E4M3 weights the FP4 kernels build in shared memory,
//   gemm::expand_l{1,2}_fp4): BITWISE, and the golden model (moe_fixture.hpp's expect_matches_golden) on those
//   experts as a second opinion;
// - repeated calls (own buffer, then into poisoned y twice), the traced kernel and CUDA-graph replays: bitwise stable;
// - the model shapes (flash, pro, v3; synthetic FP4 weights; 1 .. 2048 tokens per rank): fused FP4 == composed FP4
//   bitwise, the golden model on the folded experts of a 1-token case (MegaFp4ModelShapes);
// - bad FP4 views raise symmoe::Error naming the field before anything is written; rebinding FP8 <-> FP4 weights on
//   one layer re-plans it and stays bitwise right.
// Random inputs derive from SYMMOE_TEST_SEED (printed first; a failed test prints the command that reruns it).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu/moe_fixture.hpp"
#include "gpu/moe_fp4_fixture.hpp"
#include "symmoe/mega_moe.hpp"

namespace symmoe {
namespace {

// block_m: 0 the planner's, else forced through SYMMOE_BLOCK_M (read at construction; FP4: 16, 32 swap-AB, 64).
std::unique_ptr<MegaMoe> make_mega_fp4(Fp4Setup& f, const MegaMoeOptions& o, int block_m = 0) {
  if (block_m) ::setenv("SYMMOE_BLOCK_M", std::to_string(block_m).c_str(), 1);
  auto layer = std::make_unique<MegaMoe>(*f.s->comm, f.s->shape, f.fp4_store.views(), o);
  if (block_m) ::unsetenv("SYMMOE_BLOCK_M");
  std::printf("  fused plan (rank %d): %s\n", f.s->comm->local_ranks()[0].rank, layer->plan(0).to_string().c_str());
  EXPECT_EQ(layer->plan(0).weights, plan::GemmWeights::kFp4);
  if (block_m) EXPECT_EQ(layer->plan(0).block_m, block_m);
  return layer;
}

// The fused layer's y of one case: own buffer (poisoned after a first call), then twice into poisoned y; all three
// bitwise equal. Returns the first.
std::vector<std::vector<uint16_t>> run_fused(Fp4Setup& f, MegaMoe& mega, const Inputs& in, const std::string& what) {
  ::symmoe::Setup& s = *f.s;
  const int R = s.shape.num_ranks;
  auto no_y = in.args;
  for (auto& a : no_y) a.y = nullptr;
  const auto own = mega.forward(no_y);  // first call: the layer's buffer pointers
  mega.synchronize();
  poison_all(s, own, in);
  mega.forward(no_y);
  mega.synchronize();
  const auto first = download_y(s, own, in);
  std::vector<const uint16_t*> y_ptrs;
  for (const auto& a : in.args) y_ptrs.push_back(a.y);
  for (int rep = 0; rep < 2 && !::testing::Test::HasFailure(); ++rep) {
    poison_all(s, own, in);
    poison_all(s, y_ptrs, in);
    const auto ys = mega.forward(in.args);
    mega.synchronize();
    const auto again = download_y(s, y_ptrs, in);
    for (int i = 0; i < R; ++i) {
      EXPECT_EQ(ys[i], in.args[i].y) << what << ": forward must return the caller's y";
      EXPECT_TRUE(test::bitwise_equal(
          first[i], again[i],
          what + " rank " + std::to_string(i) + ": call " + std::to_string(rep + 2) + " vs call 1"));
    }
  }
  return first;
}

// Composed FP8 (folded experts) and composed FP4 into poisoned y, fused FP4: all bitwise equal; then the golden model.
void run_case(Fp4Setup& f, MegaMoe& mega, const Case& c) {
  ::symmoe::Setup& s = *f.s;
  const int R = s.shape.num_ranks;
  const std::string what = case_name(c) + " R=" + std::to_string(R);
  SCOPED_TRACE(what);
  Inputs in = make_inputs(s, c);
  const auto y8 = forward_into_poisoned_y(s, *s.layer, in);
  const auto y4 = forward_into_poisoned_y(s, *f.fp4_layer, in);
  const auto fused = run_fused(f, mega, in, what);
  for (int i = 0; i < R; ++i) {
    const std::string r = what + " rank " + std::to_string(i);
    EXPECT_TRUE(test::bitwise_equal(y4[i], fused[i], r + ": fused FP4 vs composed FP4"));
    EXPECT_TRUE(test::bitwise_equal(y8[i], fused[i], r + ": fused FP4 vs composed FP8 on the expanded weights"));
  }
  expect_matches_golden(s, in, fused, what, "fused layer (FP4 weights)");
}

struct Param {
  int ranks;  // 0: one per GPU
  bool synthetic;
  float clamp;
  int block_m;  // 0: the planner's (per call: 16, 32 or 64); else forced
};

class MegaFusedFp4 : public ::testing::TestWithParam<Param> {};

TEST_P(MegaFusedFp4, MatchesComposedBitwiseAndGoldenModel) {
  const Param p = GetParam();
  const int R = p.ranks == 0 ? num_gpus() : p.ranks;
  auto f = make_fp4_setup(small_shape(R, 128), p.synthetic, 128, p.clamp);
  MegaMoeOptions o;
  o.clamp = p.clamp;
  auto mega = make_mega_fp4(*f, o, p.block_m);
  const uint64_t base = fresh_seed();
  std::printf("  case seed base %llu\n", (unsigned long long)base);
  for (const Case& c : layer_cases({1, 8, 128}, base)) {
    run_case(*f, *mega, c);
    if (HasFailure()) return;  // the first failing case is the informative one
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, MegaFusedFp4,
                         ::testing::Values(Param{1, false, 0.f, 0}, Param{8, false, 2.f, 0}, Param{8, true, 0.f, 64},
                                           Param{0, true, 0.f, 0}, Param{1, true, 0.f, 32}, Param{8, false, 2.f, 16}),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           const Param& p = info.param;
                           return (p.ranks == 0 ? std::string("one_per_gpu") : "ranks" + std::to_string(p.ranks)) +
                                  (p.synthetic ? "_synthetic_fp4" : "_host_fp4") +
                                  (p.block_m ? "_block_m" + std::to_string(p.block_m) : std::string()) +
                                  (p.clamp > 0 ? "_clamp" : "");
                         });

// Few persistent CTAs (4): every CTA walks many tiles of both layers through the FP4 rings, and the case is small
// enough for compute-sanitizer (racecheck, memcheck). 1 and 8 tokens with the four routings.
TEST(MegaFp4FewSms, FourCtasMatchComposedBitwise) {
  auto f = make_fp4_setup(small_shape(1, 8), false, 128, 0.f);
  MegaMoeOptions o;
  o.num_sms = 4;
  auto mega = make_mega_fp4(*f, o);
  const uint64_t base = fresh_seed();
  std::printf("  case seed base %llu\n", (unsigned long long)base);
  for (const Case& c : layer_cases({1, 8}, base)) {
    run_case(*f, *mega, c);
    if (HasFailure()) return;
  }
}

// One 1-token case (uniform routing) on 4 CTAs at each fused FP4 kernel's BLOCK_M (16: swap-AB, converted in
// registers; 64: the math warpgroups convert into shared memory): small enough for compute-sanitizer's racecheck, which
// runs the fused FP4 kernel far slower than memcheck (MegaFp4FewSms's eight cases do not finish in 150 s under it;
// the 16-row kernel's one call took over 40 s): the wait bound is SYMMOE_TIMEOUT_MS (default 10 s), which the
// sanitizer mode raises (tools/device-check.sh).
class MegaFp4Sanitize : public ::testing::TestWithParam<int> {};

TEST_P(MegaFp4Sanitize, OneTokenFourCtasMatchComposedBitwise) {
  auto f = make_fp4_setup(small_shape(1, 8), false, 128, 0.f, true, -1);
  MegaMoeOptions o;
  o.num_sms = 4;
  auto mega = make_mega_fp4(*f, o, GetParam());
  Case c;
  c.kind = ref::RoutingKind::kUniform, c.tokens = 1, c.seed = fresh_seed();
  run_case(*f, *mega, c);
}

INSTANTIATE_TEST_SUITE_P(BlockM, MegaFp4Sanitize, ::testing::Values(16, 64),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "block_m" + std::to_string(info.param);
                         });

// The model shapes (flash, pro, v3) with synthetic FP4 weights, one rank per GPU and 8 virtual ranks, tokens/rank
// 1, 8, 128, 2048 with the four routings (layer_cases): fused FP4 == composed FP4 bitwise on every token of every
// rank, all-masked tokens exact zeros; the golden model (on the folded experts of the sampled tokens) on the 1-token
// uniform case, one rank per GPU, as test_mega.cu's MegaModelShapes. No FP8 reference layer: folding every expert on
// the host would take minutes at these shapes.
class MegaFp4ModelShapes : public ::testing::TestWithParam<ShapeParam> {};

TEST_P(MegaFp4ModelShapes, FusedEqualsComposedBitwise) {
  const ShapeParam p = GetParam();
  const int R = p.ranks == 0 ? num_gpus() : p.ranks;
  auto f = make_fp4_setup(named_shape(p.shape, R, 2048), true, 128, 0.f, false);
  ::symmoe::Setup& s = *f->s;
  auto mega = make_mega_fp4(*f, {});
  const uint64_t base = fresh_seed();
  std::printf("  case seed base %llu\n", (unsigned long long)base);
  for (const Case& c : layer_cases({1, 8, 128, 2048}, base)) {
    const std::string what = case_name(c) + " " + p.shape + " R=" + std::to_string(R);
    SCOPED_TRACE(what);
    Inputs in = make_inputs(s, c);
    const auto composed = forward_into_poisoned_y(s, *f->fp4_layer, in);
    auto own_y = in.args;
    for (auto& a : own_y) a.y = nullptr;
    const auto fused_ptrs = mega->forward(own_y);
    mega->synchronize();
    const auto fused = download_y(s, fused_ptrs, in);
    for (int i = 0; i < R; ++i)
      EXPECT_TRUE(test::bitwise_equal(composed[i], fused[i], what + " rank " + std::to_string(i)));
    expect_all_masked_tokens_zero(s, in, fused, what);
    if (HasFailure()) return;
    if (c.tokens == 1 && c.kind == ref::RoutingKind::kUniform && c.mask == 0 && p.ranks == 0) {
      add_folded_fp4_experts(*f, in);
      expect_matches_golden(s, in, fused, what, "fused layer (FP4 weights)");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MegaFp4ModelShapes, model_shape_params(), shape_param_name);

// The traced FP4 kernel (MegaMoe::set_trace; BLOCK_M 64): y bitwise the untraced call's; then CUDA-graph
// replays of the untraced forward: bitwise the eager result.
class MegaFp4TraceAndGraph : public ::testing::TestWithParam<int> {};

TEST_P(MegaFp4TraceAndGraph, TracedAndReplayedBitwise) {
  auto f = make_fp4_setup(small_shape(8, 128), false, 128, 0.f);
  auto mega = make_mega_fp4(*f, {}, GetParam());
  ::symmoe::Setup& s = *f->s;
  Case c;
  c.kind = ref::RoutingKind::kZipf, c.mask = 0.2, c.tokens = 128, c.seed = fresh_seed();
  Inputs in = make_inputs(s, c);
  std::vector<const uint16_t*> y_ptrs;
  for (const auto& a : in.args) y_ptrs.push_back(a.y);
  poison_all(s, y_ptrs, in);
  mega->forward(in.args);
  mega->synchronize();
  const auto eager = download_y(s, y_ptrs, in);
  mega->set_trace(true);
  poison_all(s, y_ptrs, in);
  mega->forward(in.args);
  mega->synchronize();
  const auto traced = download_y(s, y_ptrs, in);
  mega->set_trace(false);
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(test::bitwise_equal(eager[i], traced[i], "rank " + std::to_string(i) + ": traced vs untraced y"));
  expect_matches_golden(s, in, eager, "eager", "fused layer (FP4 weights)");
  expect_graph_replays_bitwise(
      s, in, eager, [&] { mega->forward(in.args); }, 100);
}

INSTANTIATE_TEST_SUITE_P(BlockM, MegaFp4TraceAndGraph, ::testing::Values(16, 64),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "block_m" + std::to_string(info.param);
                         });

// Bad FP4 views, and SYMMOE_BLOCK_M=128 with FP4 weights (the fused FP4 kernels exist at BLOCK_M 16, 32, 64), raise
// naming the field or variable before the fused layer writes anything (y stays poisoned, the old binding stays);
// rebinding FP8 <-> FP4 re-plans and stays bitwise right.
TEST(MegaFp4Errors, BadWeightsRaiseBeforeWriting) {
  auto f = make_fp4_setup(small_shape(num_gpus(), 8), false, 128, 0.f);
  ::symmoe::Setup& s = *f->s;
  const MoeShape& shape = s.shape;
  Case c;
  c.tokens = 8, c.seed = fresh_seed();
  Inputs in = make_inputs(s, c);
  std::vector<const uint16_t*> y_ptrs;
  for (const auto& a : in.args) y_ptrs.push_back(a.y);
  poison_all(s, y_ptrs, in);

  auto views = f->fp4_store.views();
  views[0].w1_scale_codes = nullptr;
  EXPECT_ERROR_NAMES((void)MegaMoe(*s.comm, shape, views), "w1_scale_codes");
  views = f->fp4_store.views();
  views[0].w2_scale_codes = nullptr;
  EXPECT_ERROR_NAMES((void)MegaMoe(*s.comm, shape, views), "w2_scale_codes");
  views = s.store.views();  // FP8 weights with FP4 codes: the format is wrong
  views[0].w1_scale_codes = f->fp4_store.views()[0].w1_scale_codes;
  EXPECT_ERROR_NAMES((void)MegaMoe(*s.comm, shape, views), "weights.format is kFp8");
  views = f->fp4_store.views();
  views[0].format = static_cast<gemm::WeightFormat>(7);
  EXPECT_ERROR_NAMES((void)MegaMoe(*s.comm, shape, views), "weights.format");
  ::setenv("SYMMOE_BLOCK_M", "128", 1);  // read at construction
  EXPECT_ERROR_NAMES((void)MegaMoe(*s.comm, shape, f->fp4_store.views()),
                     "SYMMOE_BLOCK_M must be one of 16, 32, 64 for MegaMoE with fp4 weights");
  {
    MegaMoe mega(*s.comm, shape, s.store.views());  // FP8 at BLOCK_M 128: fine; rebinding FP4 is refused
    EXPECT_EQ(mega.plan(0).block_m, 128);
    EXPECT_ERROR_NAMES(mega.bind_weights(f->fp4_store.views()), "SYMMOE_BLOCK_M must be one of 16, 32, 64");
    EXPECT_EQ(mega.plan(0).weights, plan::GemmWeights::kFp8);
  }
  ::unsetenv("SYMMOE_BLOCK_M");
  {
    MegaMoe mega(*s.comm, shape, s.store.views());  // FP8 bound
    views = f->fp4_store.views();
    views.back().w2_scale_codes = nullptr;  // the last rank is bad: nothing may change on any rank
    EXPECT_ERROR_NAMES(mega.bind_weights(views), "w2_scale_codes");
    EXPECT_EQ(mega.plan(0).weights, plan::GemmWeights::kFp8);
    auto too_many = in.args;
    too_many.back().num_tokens = 9;
    EXPECT_ERROR_NAMES(mega.forward(too_many), "num_tokens 9");
    s.comm->synchronize();
    for (size_t i = 0; i < y_ptrs.size(); ++i) {
      const auto y = download_bf16(s.devices[i], y_ptrs[i], size_t(in.args[i].num_tokens) * shape.hidden);
      EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](uint16_t v) { return v == 0xFFFF; }))
          << "rank " << i << ": a refused call wrote y";
    }
    // FP8 -> FP4 -> FP8 on one layer: each binding's result is the composed layers'.
    s.layer->forward(in.args);
    s.layer->synchronize();
    const auto y8 = download_y(s, y_ptrs, in);
    for (const bool fp4 : {true, false}) {
      mega.bind_weights(fp4 ? f->fp4_store.views() : s.store.views());
      EXPECT_EQ(mega.plan(0).weights, fp4 ? plan::GemmWeights::kFp4 : plan::GemmWeights::kFp8);
      poison_all(s, y_ptrs, in);
      mega.forward(in.args);
      mega.synchronize();
      const auto y = download_y(s, y_ptrs, in);
      for (size_t i = 0; i < y.size(); ++i)
        EXPECT_TRUE(test::bitwise_equal(
            y8[i], y[i],
            std::string(fp4 ? "FP4" : "FP8") + " rebound, rank " + std::to_string(i) + ": fused vs composed FP8"));
    }
  }
}

}  // namespace
}  // namespace symmoe
