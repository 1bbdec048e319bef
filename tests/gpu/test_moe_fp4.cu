// GPU tests of the composed MoE layer with FP4 E2M1 weights (MoeRankWeights::format = kFp4, include/symmoe/moe.hpp)
// on fresh random inputs: 1 rank, one rank per GPU and 8 virtual ranks; uniform / Zipf / hot-expert / masked
// routings (with an explicit all-masked token); 1, 8 and 128 tokens per rank.
// The kernel-faithful expectation of the FP4 layer is the FP8 layer on the E4M3 weights the FP4 GEMM builds in
// shared memory (gemm::expand_l{1,2}_fp4 = the fold of every expert, fp4_fold.hpp; tests/cpu/
// test_weight_transform_fp4.cpp holds the two equal), so:
//   - the stores: the FP4 store's device arrays expanded on the host are bitwise the FP8 store of the folded
//     experts (weights and scales);
//   - y of ComposedMoe(FP4 store) is BITWISE equal to y of ComposedMoe(FP8 store of the folded experts), into a
//     poisoned y and into the layer's own (poisoned) buffer; and within the golden model's slack
//     (moe_fixture.hpp, expect_matches_golden on the folded experts) as a second opinion;
//   - CUDA-graph replays of the FP4 layer are bitwise the eager result;
//   - bad FP4 weights (missing expert, wrong shapes, wrong sizes, scales outside the fold's exact range, missing
//     scale codes, codes with FP8) raise symmoe::Error naming the argument before anything is written (the fused
//     layer with FP4 weights: tests/gpu/test_mega_fp4.cu).
// Random inputs derive from SYMMOE_TEST_SEED (printed first; a failed test prints the command that reruns it).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/compare.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/moe.hpp"
#include "symmoe/moe_weights.hpp"
#include "symmoe/reference/fp4.hpp"
#include "symmoe/weight_transform_fp4.hpp"
#include "gpu/device_array.hpp"
#include "gpu/moe_fixture.hpp"
#include "gpu/moe_fp4_fixture.hpp"

namespace symmoe {
namespace {

// Every rank's FP4 arrays, expanded on the host (expand_l{1,2}_fp4), against the FP8 store's arrays: bitwise.
void expect_stores_agree(const Fp4Setup& f) {
  const MoeShape& sh = f.s->shape;
  const int El = sh.num_local_experts(), H = sh.hidden, I = sh.intermediate;
  const auto v4 = f.fp4_store.views(), v8 = f.s->store.views();
  ASSERT_EQ(f.fp4_store.format(), gemm::WeightFormat::kFp4);
  for (size_t i = 0; i < v4.size(); ++i) {
    const int dev = f.s->devices[i];
    ASSERT_EQ(v4[i].format, gemm::WeightFormat::kFp4);
    ASSERT_TRUE(v4[i].w1_scale_codes && v4[i].w2_scale_codes);
    const size_t n1 = size_t(El) * 2 * I * H, n2 = size_t(El) * H * I;
    const size_t s1 = size_t(El) * (I / 128) * (H / 128) * 2, s2 = size_t(El) * (H / 128) * (I / 128);
    const auto d1 = download(dev, v4[i].w1, n1 / 2), d2 = download(dev, v4[i].w2, n2 / 2);
    const auto c1 = download(dev, v4[i].w1_scale_codes, size_t(El) * (H / 128) * 2 * I);
    const auto c2 = download(dev, v4[i].w2_scale_codes, size_t(El) * (I / 128) * H);
    const auto b1 = download(dev, v4[i].w1_scales, s1), b2 = download(dev, v4[i].w2_scales, s2);
    std::vector<uint8_t> e1(n1), e2(n2);
    gemm::expand_l1_fp4(d1.data(), c1.data(), b1.data(), El, I, H, e1.data());
    gemm::expand_l2_fp4(d2.data(), c2.data(), b2.data(), El, H, I, e2.data());
    const std::string r = "rank " + std::to_string(i);
    EXPECT_TRUE(test::bitwise_equal(download(dev, v8[i].w1, n1), e1, r + " w1: FP8 store vs expanded FP4 store"));
    EXPECT_TRUE(test::bitwise_equal(download(dev, v8[i].w2, n2), e2, r + " w2: FP8 store vs expanded FP4 store"));
    EXPECT_TRUE(test::bitwise_equal(download(dev, v8[i].w1_scales, s1), b1, r + " w1 scales vs FP4 bases"));
    EXPECT_TRUE(test::bitwise_equal(download(dev, v8[i].w2_scales, s2), b2, r + " w2 scales vs FP4 bases"));
  }
}

// FP8 layer (reference) into poisoned y; FP4 layer into its own poisoned buffer and into poisoned y: all bitwise
// equal; then the golden model on the FP4 y.
void run_case(Fp4Setup& f, const Case& c) {
  ::symmoe::Setup& s = *f.s;
  const int R = s.shape.num_ranks;
  const std::string what = case_name(c) + " R=" + std::to_string(R);
  SCOPED_TRACE(what);
  Inputs in = make_inputs(s, c);
  const auto y8 = forward_into_poisoned_y(s, *s.layer, in);

  auto no_y = in.args;
  for (auto& a : no_y) a.y = nullptr;
  const auto own = f.fp4_layer->forward(no_y);  // first call: sets the layer's buffer pointers
  f.fp4_layer->synchronize();
  poison_all(s, own, in);
  f.fp4_layer->forward(no_y);
  f.fp4_layer->synchronize();
  const auto y4_own = download_y(s, own, in);
  const auto y4 = forward_into_poisoned_y(s, *f.fp4_layer, in);
  for (int i = 0; i < R; ++i) {
    const std::string r = what + " rank " + std::to_string(i);
    EXPECT_TRUE(test::bitwise_equal(y8[i], y4[i], r + ": FP4 layer vs FP8 layer on the expanded weights"));
    EXPECT_TRUE(test::bitwise_equal(y4[i], y4_own[i], r + ": FP4 layer, y vs its own buffer"));
  }
  expect_matches_golden(s, in, y4, what, "composed layer (FP4 weights)");
}

struct Param {
  int ranks;  // 0: one per GPU
  bool synthetic;
  int alignment;
  float clamp;
};

class MoeComposedFp4 : public ::testing::TestWithParam<Param> {};

TEST_P(MoeComposedFp4, BitwiseEqualToFp8OnExpandedWeights) {
  const Param p = GetParam();
  const int R = p.ranks == 0 ? num_gpus() : p.ranks;
  auto f = make_fp4_setup(small_shape(R, 128), p.synthetic, p.alignment, p.clamp);
  expect_stores_agree(*f);
  if (HasFailure()) return;
  const uint64_t base = fresh_seed();
  std::printf("  case seed base %llu\n", (unsigned long long)base);
  for (const Case& c : layer_cases({1, 8, 128}, base)) {
    run_case(*f, c);
    if (HasFailure()) return;  // the first failing case is the informative one
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, MoeComposedFp4,
                         ::testing::Values(Param{1, false, 128, 0.f}, Param{8, false, 1, 2.f}, Param{0, true, 64, 0.f},
                                           Param{8, true, 128, 0.f}),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           const Param& p = info.param;
                           return (p.ranks == 0 ? std::string("one_per_gpu") : "ranks" + std::to_string(p.ranks)) +
                                  (p.synthetic ? "_synthetic_fp4" : "_host_fp4");
                         });

// CUDA-graph capture of the FP4 layer's forward on every rank's stream, replayed: bitwise the eager result.
TEST(MoeComposedFp4Graph, CaptureReplayBitwise) {
  auto f = make_fp4_setup(small_shape(8, 128), false, 128, 0.f);
  Case c;
  c.kind = ref::RoutingKind::kZipf, c.mask = 0.2, c.tokens = 128, c.seed = fresh_seed();
  Inputs in = make_inputs(*f->s, c);
  f->fp4_layer->forward(in.args);
  f->fp4_layer->synchronize();
  std::vector<const uint16_t*> y_ptrs;
  for (const auto& a : in.args) y_ptrs.push_back(a.y);
  const auto eager = download_y(*f->s, y_ptrs, in);
  expect_graph_replays_bitwise(
      *f->s, in, eager, [&] { f->fp4_layer->forward(in.args); }, 100);
}

// Bad FP4 weights raise naming the argument before the layer writes anything (y stays poisoned); the FP4 layer
// still works afterwards.
TEST(MoeComposedFp4Errors, BadWeightsRaiseBeforeWriting) {
  auto f = make_fp4_setup(small_shape(num_gpus(), 8), false, 128, 0.f);
  ::symmoe::Setup& s = *f->s;
  const MoeShape& shape = s.shape;
  Case c;
  c.tokens = 8, c.seed = fresh_seed();
  Inputs in = make_inputs(s, c);
  std::vector<const uint16_t*> y_ptrs;
  for (const auto& a : in.args) y_ptrs.push_back(a.y);
  poison_all(s, y_ptrs, in);

  auto bad = f->fp4_host;  // host weights: every check runs before the store allocates
  bad.erase(3);
  EXPECT_ERROR_NAMES((void)MoeWeightStore::from_host_fp4(*s.comm, shape, bad), "no weights for expert 3");
  bad = f->fp4_host;
  bad[5].w1.num_cols -= 128;
  EXPECT_ERROR_NAMES((void)MoeWeightStore::from_host_fp4(*s.comm, shape, bad), "expert 5 w1 is [");
  bad = f->fp4_host;
  bad[6].w2.data.pop_back();
  EXPECT_ERROR_NAMES((void)MoeWeightStore::from_host_fp4(*s.comm, shape, bad), "expert 6 w2.data holds");
  bad = f->fp4_host;
  bad[7].w2.scales_ue8m0.resize(bad[7].w2.scales_ue8m0.size() / 4);  // per-128 instead of per-32 codes
  EXPECT_ERROR_NAMES((void)MoeWeightStore::from_host_fp4(*s.comm, shape, bad), "expert 7 w2.scales_ue8m0 holds");
  bad = f->fp4_host;
  bad[9].w1.scales_ue8m0[0] = 200, bad[9].w1.scales_ue8m0[1] = 10;  // one block spanning 190 binades
  EXPECT_ERROR_NAMES((void)MoeWeightStore::from_host_fp4(*s.comm, shape, bad), "expert 9 w1");

  auto views = f->fp4_store.views();
  views[0].w1_scale_codes = nullptr;
  EXPECT_ERROR_NAMES((void)ComposedMoe(*s.comm, shape, views), "w1_scale_codes");
  views = f->fp4_store.views();
  views[0].w2_scale_codes = nullptr;
  EXPECT_ERROR_NAMES((void)ComposedMoe(*s.comm, shape, views), "w2_scale_codes");
  views = s.store.views();  // FP8 weights with FP4 codes: the format is wrong
  views[0].w1_scale_codes = f->fp4_store.views()[0].w1_scale_codes;
  EXPECT_ERROR_NAMES((void)ComposedMoe(*s.comm, shape, views), "weights.format is kFp8");
  views = f->fp4_store.views();
  views[0].format = static_cast<gemm::WeightFormat>(7);
  EXPECT_ERROR_NAMES((void)ComposedMoe(*s.comm, shape, views), "weights.format");

  auto too_many = in.args;
  too_many.back().num_tokens = 9;
  EXPECT_ERROR_NAMES(f->fp4_layer->forward(too_many), "num_tokens 9");
  s.comm->synchronize();
  for (size_t i = 0; i < y_ptrs.size(); ++i) {
    const auto y = download_bf16(s.devices[i], y_ptrs[i], size_t(in.args[i].num_tokens) * shape.hidden);
    EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](uint16_t v) { return v == 0xFFFF; }))
        << "rank " << i << ": a refused call wrote y";
  }
  run_case(*f, c);
}

}  // namespace
}  // namespace symmoe
