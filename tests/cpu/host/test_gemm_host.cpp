// Host side of the grouped GEMM without a GPU: argument checks name the bad argument before any launch, and the
// L1 weight transform is a permutation whose inverse restores the original rows and scales.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "symmoe/common.hpp"
#include "symmoe/gemm.hpp"
#include "symmoe/weight_transform.hpp"

namespace symmoe::gemm {
namespace {

// A valid-looking input (fake, 16-byte aligned device addresses; never dereferenced by the checks).
GroupedGemmInput valid_input() {
  GroupedGemmInput in;
  in.layout = GroupLayout::kContiguous;
  in.num_experts = 4, in.n = 256, in.k = 512, in.num_rows = 1000;
  in.segment_starts = reinterpret_cast<const int32_t*>(uintptr_t(0x1000));
  in.a = reinterpret_cast<const uint8_t*>(uintptr_t(0x2000));
  in.sfa = reinterpret_cast<const float*>(uintptr_t(0x3000));
  in.sfa_stride = sfa_stride_for(1000);
  in.b = reinterpret_cast<const uint8_t*>(uintptr_t(0x4000));
  in.sfb = reinterpret_cast<const float*>(uintptr_t(0x5000));
  return in;
}

void expect_error_naming(const GroupedGemmInput& in, bool swiglu, const std::string& word) {
  try {
    check_input(in, swiglu);
    ADD_FAILURE() << "no error; expected one naming '" << word << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}

TEST(GemmHost, ValidInputPasses) { EXPECT_NO_THROW(check_input(valid_input(), false)); }

// The launch is the planner's: one of plan::kGemmKernels, pins name themselves when no compiled kernel fits.
TEST(GemmHost, LaunchComesFromThePlan) {
  GroupedGemmInput in = valid_input();
  in.num_experts = 32, in.n = 4096, in.k = 7168, in.num_rows = 32 * 1536, in.sfa_stride = sfa_stride_for(32 * 1536);
  LaunchOptions opt;
  opt.num_sms = 132;  // no device query
  // bf16 at 128-row tiles: the one-batch core, 128 x 192, clusters of 2 where an expert holds two or more m-blocks
  // (1536 rows: 12; 192 rows), single CTAs at one (100 rows: 128 x 128, fewer waves); the two-halves core's
  // tile-buffer kernel when pinned. SwiGLU: the one-batch core's 128 x 256 tile (clusters of 2 as above), the
  // two-halves core's when pinned (core 1) or k exceeds the one-batch core's per-tile B-scale buffer.
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 128x192x128, stages 4, cluster 2, epilogue bf16, one-batch core} x 132 CTAs");
  opt.tile_buffer = 1;
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 128x256x128, stages 3, cluster 1, epilogue bf16, tile buffer} x 132 CTAs");
  opt.tile_buffer = 0, opt.expected_rows_per_expert = 192;
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 128x192x128, stages 4, cluster 2, epilogue bf16, one-batch core} x 132 CTAs");
  opt.expected_rows_per_expert = 100;
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 128x128x128, stages 5, cluster 1, epilogue bf16, one-batch core} x 132 CTAs");
  opt.expected_rows_per_expert = 0;
  EXPECT_EQ(describe_launch(in, true, opt),
            "GemmKernel{block 128x256x128, stages 4, cluster 2, epilogue swiglu_fp8, one-batch core} x 132 CTAs");
  opt.core = 1;
  EXPECT_EQ(describe_launch(in, true, opt),
            "GemmKernel{block 128x256x128, stages 4, cluster 1, epilogue swiglu_fp8} x 132 CTAs");
  opt.core = 0, in.k = 128 * 129;  // plan::kGemmCoreMaxKBlocks (128) + 1 K blocks
  EXPECT_EQ(describe_launch(in, true, opt),
            "GemmKernel{block 128x256x128, stages 4, cluster 1, epilogue swiglu_fp8} x 132 CTAs");
  in.k = 7168;
  opt = {};
  opt.num_sms = 132, opt.block_m = 64, opt.block_n = 128;
  try {
    describe_launch(in, false, opt);
    ADD_FAILURE() << "64x128 is not compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("block_n=128"), std::string::npos) << e.what();
  }
  // Decode (masked, max_m 16): 64-row tiles, the one-batch core's split-N tile; the two-halves core's when pinned.
  in.layout = GroupLayout::kMasked, in.num_experts = 128, in.num_rows = 16, in.num_valid_rows = in.segment_starts;
  opt = {};
  opt.num_sms = 132;
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 64x256x128, stages 4, cluster 1, epilogue bf16, one-batch core} x 132 CTAs");
  opt.core = 1;
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 64x256x128, stages 5, cluster 1, epilogue bf16} x 132 CTAs");
  // The swap-AB core only when pinned (core 3): max_m 16 plans 8 rows per expert, x2 -> 16-token tiles.
  opt.core = 3, opt.block_n = 128;
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 16x128x128, stages 12, cluster 1, epilogue bf16, swap-ab core} x 132 CTAs");
  opt.block_m = 64;
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 64x128x128, stages 9, cluster 1, epilogue bf16, swap-ab core} x 132 CTAs");
  opt.block_n = 0;
  EXPECT_EQ(describe_launch(in, true, opt),
            "GemmKernel{block 64x256x128, stages 5, cluster 1, epilogue swiglu_fp8, swap-ab core} x 132 CTAs");
}

TEST(GemmHost, BadArgumentsAreNamed) {
  auto in = valid_input();
  in.n = 200;
  expect_error_naming(in, false, "n must");
  in = valid_input();
  in.n = 384;  // fine for bf16, not for the 256-column SwiGLU tile
  EXPECT_NO_THROW(check_input(in, false));
  expect_error_naming(in, true, "n must");
  in = valid_input();
  in.k = 100;
  expect_error_naming(in, false, "k must");
  in = valid_input();
  in.segment_starts = nullptr;
  expect_error_naming(in, false, "segment_starts");
  in = valid_input();
  in.layout = GroupLayout::kMasked;
  expect_error_naming(in, false, "num_valid_rows");
  in = valid_input();
  in.sfa_stride = 998;
  expect_error_naming(in, false, "sfa_stride");
  in = valid_input();
  in.a = reinterpret_cast<const uint8_t*>(uintptr_t(0x2008));
  expect_error_naming(in, false, "a must");
  in = valid_input();
  in.num_experts = 0;
  expect_error_naming(in, false, "num_experts");
}

// FP4 weights: the codes pointer is required (and only allowed) with WeightFormat::kFp4, and the plan is one of the
// compiled FP4 kernels.
TEST(GemmHost, Fp4WeightsAreCheckedAndPlanned) {
  GroupedGemmInput in = valid_input();
  in.weights = WeightFormat::kFp4;
  expect_error_naming(in, false, "b_scale_codes");
  in.b_scale_codes = reinterpret_cast<const uint32_t*>(uintptr_t(0x6004));
  expect_error_naming(in, false, "b_scale_codes");  // not 16-byte aligned
  in.b_scale_codes = reinterpret_cast<const uint32_t*>(uintptr_t(0x6000));
  EXPECT_NO_THROW(check_input(in, false));
  EXPECT_NO_THROW(check_input(in, true));
  in.weights = WeightFormat::kFp8;
  expect_error_naming(in, false, "b_scale_codes");
  in.weights = static_cast<WeightFormat>(5);
  in.b_scale_codes = nullptr;
  expect_error_naming(in, false, "weights");

  in = valid_input();
  in.weights = WeightFormat::kFp4;
  in.b_scale_codes = reinterpret_cast<const uint32_t*>(uintptr_t(0x6000));
  in.num_experts = 32, in.n = 4096, in.k = 7168, in.num_rows = 32 * 1536, in.sfa_stride = sfa_stride_for(32 * 1536);
  LaunchOptions opt;
  opt.num_sms = 132;
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 128x256x128, stages 4, cluster 1, epilogue bf16, fp4 weights} x 132 CTAs");
  EXPECT_EQ(describe_launch(in, true, opt),
            "GemmKernel{block 128x256x128, stages 4, cluster 1, epilogue swiglu_fp8, fp4 weights} x 132 CTAs");
  // Decode sizes: the swap-AB core's FP4 kernel of 16-token tiles (the planner's choice); the two-halves core's
  // 64-row tile when pinned.
  in.layout = GroupLayout::kMasked, in.num_experts = 128, in.num_rows = 16, in.num_valid_rows = in.segment_starts;
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 16x256x128, stages 11, cluster 1, epilogue bf16, swap-ab core, fp4 weights} x 132 CTAs");
  opt.core = 1;
  EXPECT_EQ(describe_launch(in, false, opt),
            "GemmKernel{block 64x256x128, stages 5, cluster 1, epilogue bf16, fp4 weights} x 132 CTAs");
  opt.core = 0;
  opt.tile_buffer = 1;  // no FP4 tile-buffer kernel
  try {
    describe_launch(in, false, opt);
    ADD_FAILURE() << "no FP4 tile-buffer kernel is compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp4"), std::string::npos) << e.what();
  }
}

TEST(GemmHost, SwigluOutputChecks) {
  const auto in = valid_input();
  SwigluFp8Output out;
  out.out = reinterpret_cast<uint8_t*>(uintptr_t(0x6000));
  out.out_scales = reinterpret_cast<float*>(uintptr_t(0x7000));
  out.row_weights = reinterpret_cast<const float*>(uintptr_t(0x8000));
  out.out_scale_stride = 1000;
  EXPECT_NO_THROW(check_output(in, out));
  out.out_scale_stride = 999;
  EXPECT_THROW(check_output(in, out), Error);
  out.out_scale_stride = 1000;
  out.row_weights = nullptr;
  EXPECT_THROW(check_output(in, out), Error);
}

TEST(GemmHost, L1TransformInterleavesAndPairsScales) {
  const int E = 2, I = 256, K = 256, kb = K / 128;
  std::mt19937_64 rng(7);
  std::vector<uint8_t> data(size_t(E) * 2 * I * K), out(data.size());
  for (auto& x : data) x = uint8_t(rng());
  std::vector<float> scales(size_t(E) * (2 * I / 128) * kb), out_scales(size_t(E) * (I / 128) * kb * 2);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = float(i + 1);
  transform_l1_weights(data.data(), scales.data(), E, I, K, out.data(), out_scales.data());
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < 2 * I; ++r) {
      const int orig = l1_original_row(r, I);
      // groups of 8: g0..7, u0..7, g8..15, ...
      EXPECT_EQ(orig, (r % 16) < 8 ? (r / 16) * 8 + r % 16 : I + (r / 16) * 8 + r % 16 - 8);
      for (int c = 0; c < K; ++c)
        ASSERT_EQ(out[(size_t(e) * 2 * I + r) * K + c], data[(size_t(e) * 2 * I + orig) * K + c]) << e << " " << r;
    }
  for (int e = 0; e < E; ++e)
    for (int t = 0; t < I / 128; ++t)
      for (int b = 0; b < kb; ++b) {
        const size_t o = ((size_t(e) * (I / 128) + t) * kb + b) * 2;
        EXPECT_EQ(out_scales[o], scales[(size_t(e) * (2 * I / 128) + t) * kb + b]);
        EXPECT_EQ(out_scales[o + 1], scales[(size_t(e) * (2 * I / 128) + I / 128 + t) * kb + b]);
      }
  EXPECT_THROW(transform_l1_weights(data.data(), scales.data(), E, 100, K, out.data(), out_scales.data()), Error);
}

}  // namespace
}  // namespace symmoe::gemm
