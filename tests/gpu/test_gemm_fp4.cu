// GPU tests of the grouped GEMM with FP4 E2M1 weights (include/symmoe/gemm.hpp, WeightFormat::kFp4) on fresh random
// data, contiguous and masked layouts, experts of 0, 1, 127, 129, 386 rows:
//   - bitwise equal to the FP8 kernel run on the host-expanded weights (expand_*_fp4: the E4M3 the FP4 kernel must
//     build in shared memory), bf16 epilogue and L1 (SwiGLU + FP8) epilogue, outputs and scales;
//   - bf16 D vs the kernel-faithful model (ref::gemm_faithful on the folded weights, reference/fp4.hpp) <= 1e-3 and
//     vs the exact product <= 2e-3 (relative Frobenius) everywhere, and bitwise in GroupedGemmFp4Faithful (as the
//     FP8 suite's GroupedGemmFaithful holds on normal data);
//   - rows outside the experts' valid rows keep the poison;
//   - bad FP4 arguments raise before anything is written.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/compare.hpp"
#include "gpu/device_array.hpp"
#include "gpu/gemm_fixture.hpp"
#include "reference/random.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/fp4_fold.hpp"
#include "symmoe/gemm.hpp"
#include "symmoe/quant.hpp"
#include "symmoe/reference/gemm.hpp"
#include "symmoe/weight_transform_fp4.hpp"

namespace fmt = symmoe::fmt;
namespace gemm = symmoe::gemm;
namespace ref = symmoe::ref;
namespace rnd = symmoe::ref::rnd;

namespace {

using symmoe::test::DeviceArray;
using symmoe::test::fresh_seed;  // SYMMOE_TEST_SEED reproduces a run (gpu/device_array.hpp)
using symmoe::test::printed_seed;
using symmoe::test::sync_kernels;

// FP4 weights [n, k] per expert in the original layout (gpu/gemm_fixture.hpp).
using Problem = symmoe::test::GemmProblem<symmoe::Fp4Weights>;

Problem make_problem(gemm::GroupLayout layout, const std::vector<int>& counts, int alignment_or_max_m, int n, int k,
                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  Problem p;
  symmoe::test::fill_rows_and_activations(p, layout, counts, alignment_or_max_m, n, k, fmt::ScaleFormat::kFp32, rng);
  for (int e = 0; e < p.num_experts; ++e) {
    // Per-32-block magnitudes over a few binades, so the scale codes of a 128 x 128 block differ (the per-32 shift
    // of the upconversion is exercised) and stay inside the fold's exact range.
    std::vector<float> w(size_t(n) * k);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < k; ++c) {
        const float block_mag = std::exp2(float((r / 32 + 3 * (c / 32) + e) % 5) - 2.f);
        w[size_t(r) * k + c] = float(rnd::standard_normal(rng)) * 0.05f * block_mag;
      }
    p.b.push_back(symmoe::quantize_weights_fp4(w.data(), n, k));
  }
  return p;
}

// The packed UE8M0 scales [n, k/128] int32 of one expert: byte for byte its code array [n, k/32].
std::vector<uint32_t> packed_scales(const symmoe::Fp4Weights& w) {
  std::vector<uint32_t> s(w.scales_ue8m0.size() / 4);
  std::memcpy(s.data(), w.scales_ue8m0.data(), s.size() * 4);
  return s;
}

// Host weights in the kernel layouts: FP4 (data, MN-major codes, bases) and the FP8 expansion of them.
struct KernelWeights {
  std::vector<uint8_t> fp4_data, fp8_data;
  std::vector<uint32_t> codes;
  std::vector<float> bases;
};

// L2 / bf16 epilogue: transform_l2_weights_fp4 (hidden = n, inter = k).
KernelWeights l2_weights(const Problem& p) {
  KernelWeights w;
  std::vector<uint8_t> data;
  std::vector<uint32_t> scales;
  for (const auto& b : p.b) {
    data.insert(data.end(), b.data.begin(), b.data.end());
    const auto s = packed_scales(b);
    scales.insert(scales.end(), s.begin(), s.end());
  }
  const int E = p.num_experts;
  w.codes.resize(size_t(E) * p.n * (p.k / 128));
  w.bases.resize(size_t(E) * (p.n / 128) * (p.k / 128));
  w.fp4_data.resize(data.size());
  gemm::transform_l2_weights_fp4(data.data(), scales.data(), E, p.n, p.k, w.fp4_data.data(), w.codes.data(),
                                 w.bases.data());
  w.fp8_data.resize(size_t(E) * p.n * p.k);
  gemm::expand_l2_fp4(w.fp4_data.data(), w.codes.data(), w.bases.data(), E, p.n, p.k, w.fp8_data.data());
  return w;
}

// L1 / SwiGLU epilogue: p.b are [2I, K] gate-then-up; transform_l1_weights_fp4 interleaves them.
KernelWeights l1_weights(const Problem& p) {
  KernelWeights w;
  std::vector<uint8_t> data;
  std::vector<uint32_t> scales;
  for (const auto& b : p.b) {
    data.insert(data.end(), b.data.begin(), b.data.end());
    const auto s = packed_scales(b);
    scales.insert(scales.end(), s.begin(), s.end());
  }
  const int E = p.num_experts, inter = p.n / 2;
  w.fp4_data.resize(data.size());
  w.codes.resize(size_t(E) * p.n * (p.k / 128));
  w.bases.resize(size_t(E) * (inter / 128) * (p.k / 128) * 2);
  gemm::transform_l1_weights_fp4(data.data(), scales.data(), E, inter, p.k, w.fp4_data.data(), w.codes.data(),
                                 w.bases.data());
  w.fp8_data.resize(size_t(E) * p.n * p.k);
  gemm::expand_l1_fp4(w.fp4_data.data(), w.codes.data(), w.bases.data(), E, inter, p.k, w.fp8_data.data());
  return w;
}

// Device copies: A (gpu/gemm_fixture.hpp), the FP4 weights with their codes and bases, and their FP8 expansion.
struct DeviceInputs {
  symmoe::test::DeviceActivations act;
  DeviceArray<uint8_t> b_fp4, b_fp8;
  DeviceArray<uint32_t> codes;
  DeviceArray<float> bases;
  DeviceInputs(const Problem& p, const KernelWeights& w)
      : act(p), b_fp4(w.fp4_data), b_fp8(w.fp8_data), codes(w.codes), bases(w.bases) {}
  gemm::GroupedGemmInput input(const Problem& p, gemm::WeightFormat weights) const {
    gemm::GroupedGemmInput in = act.input(p);
    in.sfb = bases.ptr;
    in.weights = weights;
    if (weights == gemm::WeightFormat::kFp4) {
      in.b = b_fp4.ptr, in.b_scale_codes = codes.ptr;
    } else {
      in.b = b_fp8.ptr;
    }
    return in;
  }
};

struct Config {
  int block_m, num_sms;  // 0: planner's choice / all SMs
  int core = 0;          // 1: the two-halves core, 3: the swap-AB core (plan::GemmCore), 0: planner's choice
  int block_n = 0;       // 0: planner's choice (the swap-AB core's bf16 tiles: 128 or 256 weight rows)
};
std::string name(const Config& c) {
  return "block_m " + std::to_string(c.block_m) + " block_n " + std::to_string(c.block_n) + " sms " +
         std::to_string(c.num_sms) +
         (c.core == 3 ? " swap-ab"
          : c.core    ? " core " + std::to_string(c.core)
                      : "");
}
gemm::LaunchOptions launch_options(const Config& c) {
  gemm::LaunchOptions opt;
  opt.block_m = c.block_m, opt.num_sms = c.num_sms, opt.core = c.core, opt.block_n = c.block_n;
  return opt;
}
// The swap-AB core's FP4 kernels (the FP8 comparison runs its FP8 kernel of the same block_m and epilogue): 16, 32
// and 64 tokens per tile, its own BLOCK_M ladder (block_m 0), and few CTAs.
const std::vector<Config> kSwapAbConfigs = {{16, 0, 3, 128}, {16, 0, 3, 256}, {32, 0, 3, 128}, {32, 0, 3, 256},
                                            {64, 0, 3, 128}, {64, 0, 3, 256}, {0, 0, 3},       {16, 3, 3, 256},
                                            {32, 2, 3, 128}, {64, 5, 3, 256}};
// Its L1 (SwiGLU) kernels: one 256-row tile per block_m (block_n 0).
const std::vector<Config> kSwapAbL1Configs = {{16, 0, 3}, {32, 0, 3}, {64, 0, 3}, {0, 0, 3},
                                              {16, 3, 3}, {32, 2, 3}, {64, 5, 3}};
// Both FP4 tile shapes of the two-halves core, the planner's choice, and few-CTA runs (the stage ring wraps across
// tiles, the stop-marked stage lands on every stage index), then the swap-AB core's.
std::vector<Config> all_configs() {
  std::vector<Config> configs = {{64, 0, 1}, {128, 0}, {0, 0}, {128, 5}, {64, 3, 1}, {128, 1}, {64, 2, 1}};
  configs.insert(configs.end(), kSwapAbConfigs.begin(), kSwapAbConfigs.end());
  return configs;
}
const std::vector<Config> kConfigs = all_configs();

// bf16 epilogue: FP4 kernel == FP8 kernel on the expanded weights (bitwise), tolerances vs faithful and exact
// (expect_bitwise: == bf16(faithful) bit for bit), poison kept outside the valid rows.
void check_bf16(const Problem& p, const Config& c, bool expect_bitwise = false) {
  SCOPED_TRACE(name(c));
  const KernelWeights w = l2_weights(p);
  DeviceInputs dev(p, w);
  const size_t elems = size_t(p.total_rows()) * p.n;
  DeviceArray<uint16_t> d4(elems), d8(elems);
  d4.poison();
  d8.poison();
  const gemm::LaunchOptions opt = launch_options(c);
  gemm::grouped_gemm_bf16(dev.input(p, gemm::WeightFormat::kFp4), d4.ptr, nullptr, opt);
  sync_kernels();
  gemm::grouped_gemm_bf16(dev.input(p, gemm::WeightFormat::kFp8), d8.ptr, nullptr, opt);
  sync_kernels();
  const auto got = d4.download();
  EXPECT_TRUE(symmoe::test::bitwise_equal(d8.download(), got, "FP4 kernel vs FP8 kernel on expand_l2_fp4"));
  // The model multiplies the folded weights: the fold is exact, so gemm_exact is the FP4 product.
  const auto folded = [&](int e) { return symmoe::fold_fp4_weights(p.b[e], "expert weights"); };
  symmoe::test::check_bf16_against_model(p, got, folded, "fp4 " + name(c), expect_bitwise,
                                         "bf16 D vs bf16(ref::gemm_faithful) on the folded weights");
}

TEST(GroupedGemmFp4, ContiguousOddAndEmptyExperts) {
  const uint64_t seed = printed_seed();
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 127, 129, 386, 0, 64}, 128, 512, 512, seed);
  for (const auto& c : kConfigs) check_bf16(p, c);
}

TEST(GroupedGemmFp4, ContiguousPartialLastNBlock) {
  const uint64_t seed = printed_seed();
  // n = 384: the last 256-column n-block is half past n (its base codes read 0, its columns are never stored).
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {129, 1, 386}, 64, 384, 384, seed);
  for (const auto& c : {Config{64, 0}, Config{128, 0}, Config{128, 3}}) check_bf16(p, c);
}

TEST(GroupedGemmFp4, MaskedOddAndEmptyExperts) {
  const uint64_t seed = printed_seed();
  // 400 > max_m: the kernel clamps to max_m rows.
  const auto p = make_problem(gemm::GroupLayout::kMasked, {0, 1, 127, 129, 386, 400, 16}, 388, 256, 512, seed);
  for (const auto& c : kConfigs) check_bf16(p, c);
}

TEST(GroupedGemmFp4, MaskedDecodeSizes) {
  const uint64_t seed = printed_seed();
  const auto p = make_problem(gemm::GroupLayout::kMasked, {1, 8, 16, 0, 5, 16, 3, 12}, 16, 512, 768, seed);
  for (const auto& c :
       {Config{64, 0}, Config{0, 0}, Config{64, 3}, Config{16, 0, 3}, Config{32, 0, 3}, Config{0, 0, 3}})
    check_bf16(p, c);
}

// The swap-AB core at decode row counts: experts of 0 and 1 rows, partial token tiles, several token tiles (70 rows:
// 5 / 3 / 2 tiles of 16 / 32 / 64), contiguous with segments at any row, masked with max_m 64 and random counts in
// [0, 64]; n 384 (three 128-row weight tiles). FP4 == FP8 kernel on the expanded weights, and the model.
TEST(GroupedGemmFp4, SwapAbDecodeRowCounts) {
  const uint64_t seed = printed_seed();
  const auto p =
      make_problem(gemm::GroupLayout::kContiguous, {0, 1, 5, 16, 17, 32, 33, 70, 64, 0, 129}, 1, 384, 640, seed);
  for (const auto& c : kSwapAbConfigs) check_bf16(p, c);
  std::mt19937_64 rng(seed + 100);
  std::vector<int> counts = {0, 64, 1, 63};
  while (counts.size() < 16) counts.push_back(rnd::uniform_below(rng, 65));
  const auto m = make_problem(gemm::GroupLayout::kMasked, counts, 64, 384, 512, seed + 101);
  for (const auto& c : kSwapAbConfigs) check_bf16(m, c);
}

// The swap-AB core at a layer's K (7168: 56 K blocks of codes) and n 1024, masked decode (max_m 64).
TEST(GroupedGemmFp4, SwapAbAtLayerK) {
  const uint64_t seed = printed_seed();
  const auto p = make_problem(gemm::GroupLayout::kMasked, {1, 8, 0, 17, 33, 64}, 64, 1024, 7168, seed);
  for (const auto& c : {Config{16, 0, 3}, Config{32, 0, 3}, Config{64, 0, 3}}) check_bf16(p, c);
}

// The golden model's FP8 accumulation on FP4-valued weights: bf16 D bitwise equal to bf16(ref::gemm_faithful) on
// the folded weights, contiguous and masked.
TEST(GroupedGemmFp4Faithful, Bf16BitwiseOnNormalData) {
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 127, 129, 386, 64}, 128, 384, 512, fresh_seed());
  for (const auto& c :
       {Config{64, 0}, Config{128, 0}, Config{0, 0}, Config{16, 0, 3}, Config{32, 0, 3}, Config{64, 0, 3}})
    check_bf16(p, c, /*expect_bitwise=*/true);
  const auto m = make_problem(gemm::GroupLayout::kMasked, {0, 1, 16, 129, 200}, 160, 256, 512, fresh_seed());
  for (const auto& c : {Config{64, 0}, Config{0, 0}, Config{16, 0, 3}, Config{32, 0, 3}, Config{64, 0, 3}})
    check_bf16(m, c, /*expect_bitwise=*/true);
}

// L1 (SwiGLU + FP8) epilogue: FP4 kernel == FP8 kernel on expand_l1_fp4, outputs and scales bitwise (the FP8 L1
// kernel is held to ref::l1_epilogue by test_gemm.cu).
void check_l1(const Problem& p, float clamp, const Config& c) {
  SCOPED_TRACE(name(c) + " clamp " + std::to_string(clamp));
  const int inter = p.n / 2, total = p.total_rows();
  const KernelWeights w = l1_weights(p);
  DeviceInputs dev(p, w);
  std::mt19937_64 rng(p.k * 7 + p.n);
  std::vector<float> weights(total);
  for (auto& x : weights) x = float(0.05 + rnd::uniform01(rng));
  DeviceArray<float> d_weights(weights);
  const int scale_stride = gemm::sfa_stride_for(total);
  DeviceArray<uint8_t> out4(size_t(total) * inter), out8(size_t(total) * inter);
  DeviceArray<float> scales4(size_t(inter / 128) * scale_stride), scales8(size_t(inter / 128) * scale_stride);
  out4.poison(), out8.poison(), scales4.poison(), scales8.poison();
  const gemm::LaunchOptions opt = launch_options(c);
  gemm::SwigluFp8Output o;
  o.out_scale_stride = scale_stride, o.row_weights = d_weights.ptr, o.clamp = clamp;
  o.out = out4.ptr, o.out_scales = scales4.ptr;
  gemm::grouped_gemm_swiglu_fp8(dev.input(p, gemm::WeightFormat::kFp4), o, nullptr, opt);
  sync_kernels();
  o.out = out8.ptr, o.out_scales = scales8.ptr;
  gemm::grouped_gemm_swiglu_fp8(dev.input(p, gemm::WeightFormat::kFp8), o, nullptr, opt);
  sync_kernels();
  const auto got = out4.download();
  EXPECT_TRUE(symmoe::test::bitwise_equal(out8.download(), got, "L1 codes: FP4 kernel vs FP8 on expand_l1_fp4"));
  EXPECT_TRUE(symmoe::test::bitwise_equal(scales8.download(), scales4.download(), "L1 scales: FP4 vs FP8"));
  size_t written_rows = 0;
  for (int e = 0; e < p.num_experts; ++e) written_rows += p.valid[e];
  size_t codes_written = 0;
  for (const uint8_t q : got) codes_written += q != 0xFF;
  std::printf("    [fp4 L1 %s clamp %g] %zu valid rows, %zu codes written\n", name(c).c_str(), clamp, written_rows,
              codes_written);
  EXPECT_GT(codes_written, 0u);
}

TEST(GroupedGemmFp4L1, ContiguousSwigluFp8) {
  const uint64_t seed = printed_seed();
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 127, 129, 386, 0}, 64, 512, 384, seed);
  for (float clamp : {0.f, 0.75f})
    for (const auto& c : {Config{64, 0, 1}, Config{128, 0}, Config{0, 0}, Config{128, 3}, Config{16, 0, 3},
                          Config{32, 2, 3}, Config{64, 0, 3}})
      check_l1(p, clamp, c);
}

TEST(GroupedGemmFp4L1, MaskedSwigluFp8) {
  const uint64_t seed = printed_seed();
  const auto p = make_problem(gemm::GroupLayout::kMasked, {0, 1, 16, 129, 200}, 160, 256, 512, seed);
  for (const auto& c :
       {Config{64, 0, 1}, Config{128, 0}, Config{64, 2, 1}, Config{16, 0, 3}, Config{32, 0, 3}, Config{64, 3, 3}})
    check_l1(p, 0.5f, c);
}

// The swap-AB core's FP4 L1 tiles at decode row counts (as GroupedGemmFp4.SwapAbDecodeRowCounts), n 512.
TEST(GroupedGemmFp4L1, SwapAbDecodeRowCounts) {
  const uint64_t seed = printed_seed();
  const auto p =
      make_problem(gemm::GroupLayout::kContiguous, {0, 1, 5, 16, 17, 32, 33, 70, 64, 0, 129}, 1, 512, 640, seed);
  for (const auto& c : kSwapAbL1Configs) check_l1(p, 0.f, c);
  std::mt19937_64 rng(seed + 100);
  std::vector<int> counts = {0, 64, 1, 63};
  while (counts.size() < 16) counts.push_back(rnd::uniform_below(rng, 65));
  const auto m = make_problem(gemm::GroupLayout::kMasked, counts, 64, 512, 512, seed + 101);
  for (const auto& c : kSwapAbL1Configs) check_l1(m, 0.75f, c);
}

// Bad FP4 arguments raise symmoe::Error naming the argument, before any kernel writes the (poisoned) output.
TEST(GroupedGemmFp4, BadArgumentsRaiseBeforeWriting) {
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {1, 127}, 128, 256, 256, fresh_seed());
  const KernelWeights w = l2_weights(p);
  DeviceInputs dev(p, w);
  DeviceArray<uint16_t> d(size_t(p.total_rows()) * p.n);
  d.poison();
  auto expect_error = [&](gemm::GroupedGemmInput in, bool swiglu, const std::string& word) {
    try {
      if (swiglu) {
        DeviceArray<uint8_t> out(size_t(p.total_rows()) * p.n / 2);
        DeviceArray<float> scales(size_t(p.n / 256 + 1) * gemm::sfa_stride_for(p.total_rows())), rw(p.total_rows());
        gemm::SwigluFp8Output o;
        o.out = out.ptr, o.out_scales = scales.ptr, o.row_weights = rw.ptr;
        o.out_scale_stride = gemm::sfa_stride_for(p.total_rows());
        gemm::grouped_gemm_swiglu_fp8(in, o, nullptr);
      } else {
        gemm::grouped_gemm_bf16(in, d.ptr, nullptr);
      }
      ADD_FAILURE() << "no error; expected one naming '" << word << "'";
    } catch (const symmoe::Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  gemm::GroupedGemmInput in = dev.input(p, gemm::WeightFormat::kFp4);
  in.b_scale_codes = nullptr;  // FP4 without its codes
  expect_error(in, false, "b_scale_codes");
  in = dev.input(p, gemm::WeightFormat::kFp4);
  in.b_scale_codes = reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(dev.codes.ptr) + 4);
  expect_error(in, false, "b_scale_codes");  // misaligned (not a TMA base)
  in = dev.input(p, gemm::WeightFormat::kFp8);
  in.b_scale_codes = dev.codes.ptr;  // codes with FP8 weights: the format is wrong
  expect_error(in, false, "b_scale_codes");
  in = dev.input(p, gemm::WeightFormat::kFp4);
  in.weights = static_cast<gemm::WeightFormat>(7);
  expect_error(in, false, "weights");
  in = dev.input(p, gemm::WeightFormat::kFp4);
  in.sfb = nullptr;  // no base scales
  expect_error(in, false, "sfb");
  in = dev.input(p, gemm::WeightFormat::kFp4);
  in.k = 200;
  expect_error(in, false, "k must");
  in = dev.input(p, gemm::WeightFormat::kFp4);
  in.n = 384;  // the L1 epilogue needs n % 256 == 0
  expect_error(in, true, "n must");
  sync_kernels();
  const auto after = d.download();
  EXPECT_TRUE(std::all_of(after.begin(), after.end(), [](uint16_t v) { return v == 0xFFFF; }))
      << "a refused call wrote to d";
  // Scales outside the fold's exact range are refused by the transform (fp4_fold.hpp), before anything is written.
  std::vector<uint32_t> scales = packed_scales(p.b[0]);
  std::vector<uint8_t> codes(scales.size() * 4);
  std::memcpy(codes.data(), scales.data(), codes.size());
  codes[0] = 200, codes[1] = 10;  // one 128 x 128 block spanning 190 binades
  std::memcpy(scales.data(), codes.data(), codes.size());
  std::vector<uint32_t> out_codes(scales.size(), 0xDEADBEEFu);
  std::vector<float> out_bases(size_t(p.n / 128) * (p.k / 128), -1.f);
  std::vector<uint8_t> out_data(p.b[0].data.size(), 0xAB);
  EXPECT_THROW(gemm::transform_l2_weights_fp4(p.b[0].data.data(), scales.data(), 1, p.n, p.k, out_data.data(),
                                              out_codes.data(), out_bases.data()),
               symmoe::Error);
  EXPECT_TRUE(std::all_of(out_data.begin(), out_data.end(), [](uint8_t v) { return v == 0xAB; }));
  EXPECT_TRUE(std::all_of(out_codes.begin(), out_codes.end(), [](uint32_t v) { return v == 0xDEADBEEFu; }));
  EXPECT_TRUE(std::all_of(out_bases.begin(), out_bases.end(), [](float v) { return v == -1.f; }));
}

}  // namespace
