// GPU tests of the SM90 FP8 grouped GEMM against the golden model (include/symmoe/reference/gemm.hpp) on fresh
// random data: contiguous and masked layouts, odd and empty experts, every compiled kernel configuration, K across
// the B scales' shared-memory chunks, and the L1 (SwiGLU + FP8) epilogue element by element. Outputs are poisoned
// first; rows that must not be written are checked to still hold the poison.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/compare.hpp"
#include "reference/random.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/gemm.hpp"
#include "plan/gemm_kernels.hpp"
#include "symmoe/plan.hpp"
#include "symmoe/quant.hpp"
#include "symmoe/reference/gemm.hpp"
#include "symmoe/weight_transform.hpp"
#include "gpu/device_array.hpp"
#include "gpu/gemm_fixture.hpp"

namespace fmt = symmoe::fmt;
namespace gemm = symmoe::gemm;
namespace ref = symmoe::ref;
namespace rnd = symmoe::ref::rnd;

namespace {

using symmoe::test::DeviceArray;
using symmoe::test::sync_kernels;

using symmoe::test::fresh_seed;  // SYMMOE_TEST_SEED reproduces a run (gpu/device_array.hpp)
using symmoe::test::printed_seed;

// FP8 block weights [n, k] per expert (gpu/gemm_fixture.hpp).
using Problem = symmoe::test::GemmProblem<symmoe::Fp8BlockWeights>;

enum class Data {
  kNormal,        // x ~ N(0, 1) * 2^[-4, 4] per row, w ~ N(0, 1) * 0.05 * (1..3 per block), quantised
  kSmallIntegers  // e4m3 codes of integers in [-4, 4], random fp32 scales: every WGMMA partial sum is exact
};
// kSmallIntegers: |partial| <= 128 * 16 = 2^11, so the tensor cores' reduced-precision FP8 accumulation (Hopper
// keeps fewer than fp32's 24 bits) is exact and the GPU must match ref::gemm_faithful bit for bit.
void make_small_integer_data(std::vector<uint8_t>& codes, std::vector<float>& scales, std::mt19937_64& rng) {
  for (auto& c : codes) c = fmt::float_to_e4m3(float(rnd::uniform_below(rng, 9) - 4));
  for (auto& s : scales) s = float(std::exp2(rnd::uniform01(rng) * 8 - 10));
}

Problem make_problem(gemm::GroupLayout layout, const std::vector<int>& counts, int alignment_or_max_m, int n, int k,
                     fmt::ScaleFormat a_scales, uint64_t seed, Data data = Data::kNormal) {
  std::mt19937_64 rng(seed);
  Problem p;
  symmoe::test::fill_rows_and_activations(p, layout, counts, alignment_or_max_m, n, k, a_scales, rng);
  for (int e = 0; e < p.num_experts; ++e) {
    std::vector<float> w(size_t(n) * k);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < k; ++c) {
        const float block_mag = 1.f + float((r / 128 + c / 128 + e) % 3);
        w[size_t(r) * k + c] = float(rnd::standard_normal(rng)) * 0.05f * block_mag;
      }
    p.b.push_back(symmoe::quantize_weights_128x128(w.data(), n, k));
    if (data == Data::kSmallIntegers) make_small_integer_data(p.b.back().data, p.b.back().scales, rng);
  }
  if (data == Data::kSmallIntegers) {
    make_small_integer_data(p.a.data, p.a.scales, rng);
    if (a_scales == fmt::ScaleFormat::kUe8m0)
      for (auto& s : p.a.scales) s = fmt::ceil_pow2(s);
  }
  return p;
}

// Device copies of the problem's inputs in the kernel's layouts: A (gpu/gemm_fixture.hpp) and the weights as given.
struct DeviceInputs {
  symmoe::test::DeviceActivations act;
  DeviceArray<uint8_t> b;
  DeviceArray<float> sfb;
  DeviceInputs(const Problem& p, const std::vector<uint8_t>& b_data, const std::vector<float>& b_scales)
      : act(p), b(b_data), sfb(b_scales) {}
  gemm::GroupedGemmInput input(const Problem& p) const {
    gemm::GroupedGemmInput in = act.input(p);
    in.b = b.ptr, in.sfb = sfb.ptr;
    return in;
  }
};

void concat_weights(const Problem& p, std::vector<uint8_t>& data, std::vector<float>& scales) {
  for (const auto& w : p.b) {
    data.insert(data.end(), w.data.begin(), w.data.end());
    scales.insert(scales.end(), w.scales.begin(), w.scales.end());
  }
}

struct Config {
  int block_m, block_n, num_sms;  // 0: planner's choice (num_sms 0: all SMs)
  int tile_buffer = 0;            // 1: whole-slice epilogue buffer kernel, -1: not, 0: planner's choice
  int cluster = 0;                // 1 or 2, 0: planner's choice
  int core = 0;                   // 1: two-halves, 2: one-batch, 3: swap-AB (plan::GemmCore), 0: planner's choice
};
std::string name(const Config& c) {
  return std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + " sms " + std::to_string(c.num_sms) +
         (c.tile_buffer ? c.tile_buffer > 0 ? " tile-buffer" : " no-tile-buffer" : "") +
         (c.cluster ? " cluster " + std::to_string(c.cluster) : "") +
         (c.core == 1   ? " two-halves"
          : c.core == 2 ? " one-batch"
          : c.core == 3 ? " swap-ab"
                        : "");
}
gemm::LaunchOptions launch_options(const Config& c) {
  gemm::LaunchOptions opt;
  opt.block_m = c.block_m, opt.block_n = c.block_n, opt.num_sms = c.num_sms;
  opt.tile_buffer = c.tile_buffer, opt.cluster_size = c.cluster, opt.core = c.core;
  return opt;
}
// The one-batch core's kernels (plan::GemmCore::kOneBatch): 128 x 192 and 128 x 128, clusters of 1 and 2, and the
// split-N 64 x 256, all SMs and few CTAs (the stage ring and the D tile's TMA stores wrap across tiles; a cluster
// pairs an odd m-block count's last m-block along N, with its own B tiles: scheduler.cuh).
const std::vector<Config> kOneBatchConfigs = {{128, 192, 0, 0, 1, 2}, {128, 192, 0, 0, 2, 2}, {128, 128, 0, 0, 1, 2},
                                              {128, 128, 0, 0, 2, 2}, {128, 192, 3, 0, 1, 2}, {128, 192, 4, 0, 2, 2},
                                              {128, 128, 6, 0, 2, 2}, {64, 256, 0, 0, 0, 2},  {64, 256, 4, 0, 0, 2}};
std::vector<Config> with_one_batch(std::vector<Config> configs) {
  configs.insert(configs.end(), kOneBatchConfigs.begin(), kOneBatchConfigs.end());
  return configs;
}
// The swap-AB core's kernels (plan::GemmCore::kSwapAB): 16, 32 and 64 tokens per tile on all SMs, its own BLOCK_M
// ladder (block_m 0), and few CTAs (the stage ring wraps across tiles). bf16: both weight tiles (128 and 256 rows);
// SwiGLU: its 256-row tile (block_n 0: the planner's, the only one).
const std::vector<Config> kSwapAbConfigs = {
    {16, 128, 0, 0, 0, 3}, {16, 256, 0, 0, 0, 3}, {32, 128, 0, 0, 0, 3}, {32, 256, 0, 0, 0, 3}, {64, 128, 0, 0, 0, 3},
    {64, 256, 0, 0, 0, 3}, {0, 0, 0, 0, 0, 3},    {16, 256, 3, 0, 0, 3}, {32, 128, 2, 0, 0, 3}, {64, 256, 5, 0, 0, 3}};
const std::vector<Config> kSwapAbL1Configs = {{16, 0, 0, 0, 0, 3}, {32, 0, 0, 0, 0, 3}, {64, 0, 0, 0, 0, 3},
                                              {0, 0, 0, 0, 0, 3},  {16, 0, 3, 0, 0, 3}, {32, 0, 2, 0, 0, 3},
                                              {64, 0, 5, 0, 0, 3}};
std::vector<Config> with_swap_ab(std::vector<Config> configs, bool swiglu = false) {
  const std::vector<Config>& add = swiglu ? kSwapAbL1Configs : kSwapAbConfigs;
  configs.insert(configs.end(), add.begin(), add.end());
  return configs;
}
// Both other cores' configurations after `configs`.
std::vector<Config> with_cores(std::vector<Config> configs) { return with_swap_ab(with_one_batch(std::move(configs))); }
// Every compiled bf16 configuration, plus few-CTA runs (many tiles per CTA: the stage ring wraps across tiles).
const std::vector<Config> kAllConfigs = with_cores({{128, 128, 0, 0, 0, 1},
                                                    {64, 256, 0},
                                                    {128, 256, 0, -1},
                                                    {128, 256, 6, -1},
                                                    {64, 256, 5},
                                                    {128, 128, 3, 0, 0, 1},
                                                    {128, 256, 0, 1},
                                                    {128, 256, 5, 1},
                                                    {0, 0, 0}});
// The L1 (SwiGLU + FP8) kernels: the two-halves core's, the one-batch core's 128 x 256 at clusters of 1 and 2 (all SMs
// and few CTAs: the stage ring and the output tile's TMA stores wrap across tiles) and the swap-AB core's (256
// interleaved weight rows per tile).
const std::vector<Config> kOneBatchL1Configs = {
    {128, 256, 0, 0, 1, 2}, {128, 256, 3, 0, 1, 2}, {128, 256, 0, 0, 2, 2}, {128, 256, 4, 0, 2, 2}};
// The one-batch core's split-N 64 x 256 L1 kernel, all SMs and few CTAs.
const std::vector<Config> kOneBatchSplitNL1Configs = {{64, 256, 0, 0, 0, 2}, {64, 256, 3, 0, 0, 2}};
const std::vector<Config> kL1Configs = with_swap_ab({{64, 256, 0},
                                                     {128, 256, 0, 0, 0, 1},
                                                     {64, 256, 4},
                                                     {128, 256, 3, 0, 0, 1},
                                                     kOneBatchL1Configs[0],
                                                     kOneBatchL1Configs[1],
                                                     kOneBatchL1Configs[2],
                                                     kOneBatchL1Configs[3],
                                                     kOneBatchSplitNL1Configs[0],
                                                     kOneBatchSplitNL1Configs[1],
                                                     {0, 0, 0}},
                                                    true);

// Runs the bf16 GEMM with config c into a poisoned D and returns D; a second call into a fresh poisoned buffer must
// give it bitwise (deterministic, no state left between calls).
// The bf16 GEMM's device inputs (the problem's FP8 weights as given) and a poisoned D.
struct Bf16Device {
  DeviceInputs dev;
  DeviceArray<uint16_t> d;
  static DeviceInputs inputs(const Problem& p) {
    std::vector<uint8_t> b_data;
    std::vector<float> b_scales;
    concat_weights(p, b_data, b_scales);
    return DeviceInputs(p, b_data, b_scales);
  }
  explicit Bf16Device(const Problem& p) : dev(inputs(p)), d(size_t(p.total_rows()) * p.n) { d.poison(); }
};

std::vector<uint16_t> run_bf16(const Problem& p, const Config& c) {
  Bf16Device device(p);
  DeviceInputs& dev = device.dev;
  DeviceArray<uint16_t>& d = device.d;
  const gemm::LaunchOptions opt = launch_options(c);
  gemm::grouped_gemm_bf16(dev.input(p), d.ptr, nullptr, opt);
  sync_kernels();
  const auto got = d.download();
  d.poison();
  gemm::grouped_gemm_bf16(dev.input(p), d.ptr, nullptr, opt);
  sync_kernels();
  EXPECT_TRUE(symmoe::test::bitwise_equal(got, d.download(), "second call"));
  return got;
}

// Runs the bf16 GEMM and compares every expert's valid rows with the golden model; padding rows must keep the
// poison. Tolerances: vs faithful rounded to bf16 <= 1e-3, vs exact <= 2e-3 (relative Frobenius). Returns D.
std::vector<uint16_t> check_bf16(const Problem& p, const Config& c, bool expect_bitwise = false) {
  SCOPED_TRACE(name(c));
  const auto got = run_bf16(p, c);
  const auto expert_weights = [&](int e) -> const symmoe::Fp8BlockWeights& { return p.b[e]; };
  symmoe::test::check_bf16_against_model(p, got, expert_weights, name(c), expect_bitwise,
                                         "bf16 D vs bf16(ref::gemm_faithful)");
  return got;
}

// Large K: the first config against the golden model (check_bf16), every other one bitwise equal to it (padding
// rows included), so the model runs once per problem.
void check_bf16_configs_agree(const Problem& p, const std::vector<Config>& configs, bool expect_bitwise) {
  ASSERT_FALSE(configs.empty());
  const auto first = check_bf16(p, configs[0], expect_bitwise);
  for (size_t i = 1; i < configs.size(); ++i) {
    SCOPED_TRACE(name(configs[i]));
    EXPECT_TRUE(
        symmoe::test::bitwise_equal(first, run_bf16(p, configs[i]), name(configs[i]) + " vs " + name(configs[0])));
  }
}

TEST(GroupedGemm, ContiguousOddAndEmptyExperts) {
  const uint64_t seed = printed_seed();
  // 300 rows: three m-blocks, so clusters of 2 take the third along N (n 384: three 128-column n-blocks, one rank
  // without an n-block in the last pair; scheduler.cuh).
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 127, 129, 256, 0, 64, 200, 300}, 128, 384, 512,
                              fmt::ScaleFormat::kFp32, seed);
  for (const auto& c : kAllConfigs) check_bf16(p, c);
}

TEST(GroupedGemm, ContiguousSkewedUe8m0ScalesAlignment64) {
  const uint64_t seed = printed_seed();
  // One hot expert, Zipf-like tail, an empty last expert; segments aligned to 64 only.
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {700, 150, 40, 9, 3, 1, 0}, 64, 256, 640,
                              fmt::ScaleFormat::kUe8m0, seed);
  for (const auto& c :
       with_cores({Config{128, 256, 0, -1}, Config{64, 256, 0}, Config{128, 128, 3, 0, 0, 1}, Config{128, 256, 3, 1}}))
    check_bf16(p, c);
}

TEST(GroupedGemm, MaskedOddAndEmptyExperts) {
  const uint64_t seed = printed_seed();
  // 300 > max_m: the kernel clamps to max_m rows.
  const auto p =
      make_problem(gemm::GroupLayout::kMasked, {0, 1, 127, 129, 300, 16}, 192, 256, 384, fmt::ScaleFormat::kFp32, seed);
  for (const auto& c : kAllConfigs) check_bf16(p, c);
}

TEST(GroupedGemm, ExactAccumulationBitwiseAllConfigs) {
  const uint64_t seed = printed_seed();
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 127, 129, 256, 3}, 128, 384, 1024,
                              fmt::ScaleFormat::kFp32, seed, Data::kSmallIntegers);
  for (const auto& c : kAllConfigs) check_bf16(p, c, true);
  const auto m = make_problem(gemm::GroupLayout::kMasked, {1, 0, 5, 1}, 5, 256, 512, fmt::ScaleFormat::kUe8m0, seed + 1,
                              Data::kSmallIntegers);
  for (const auto& c : kAllConfigs) check_bf16(m, c, true);
  // Segments at any row (alignment 1): A-scale boxes start unaligned.
  const auto u = make_problem(gemm::GroupLayout::kContiguous, {5, 3, 130, 1, 0, 7}, 1, 256, 384,
                              fmt::ScaleFormat::kFp32, seed + 2, Data::kSmallIntegers);
  for (const auto& c : kAllConfigs) check_bf16(u, c, true);
}

TEST(GroupedGemm, MaskedOneTokenPerExpert) {
  const uint64_t seed = printed_seed();
  const auto p =
      make_problem(gemm::GroupLayout::kMasked, std::vector<int>(16, 1), 1, 512, 768, fmt::ScaleFormat::kFp32, seed);
  for (const auto& c : {Config{64, 256, 0}, Config{128, 256, 7}, Config{128, 192, 0, 0, 2, 2},
                        Config{16, 0, 0, 0, 0, 3}, Config{64, 0, 0, 0, 0, 3}})
    check_bf16(p, c);
}

TEST(GroupedGemm, MaskedDecodeSizes) {
  const uint64_t seed = printed_seed();
  const auto p = make_problem(gemm::GroupLayout::kMasked, {1, 8, 16, 0, 5, 16, 3, 12}, 16, 512, 256,
                              fmt::ScaleFormat::kFp32, seed);
  for (const auto& c : with_cores({Config{64, 256, 0}, Config{64, 256, 3}, Config{128, 128, 0, 0, 0, 1}}))
    check_bf16(p, c);
}

// The swap-AB core (tokens on WGMMA N) at decode row counts: experts of 0 and 1 rows, partial token tiles, several
// token tiles (70 rows: 5 / 3 / 2 tiles of 16 / 32 / 64), n 384 (three 128-row weight tiles); contiguous with
// segments at any row and at multiples of 16, masked with max_m 64 and random counts in [0, 64]. Exact-accumulation
// data bitwise against the model, normal data bitwise against the faithful model (as GroupedGemmFaithful).
TEST(GroupedGemm, SwapAbDecodeRowCounts) {
  const uint64_t seed = printed_seed();
  for (const int alignment : {1, 16}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 5, 16, 17, 32, 33, 70, 64, 0, 129}, alignment,
                                384, 640, fmt::ScaleFormat::kFp32, seed + alignment, Data::kSmallIntegers);
    for (const auto& c : kSwapAbConfigs) check_bf16(p, c, true);
  }
  std::mt19937_64 rng(seed + 100);
  std::vector<int> counts = {0, 64, 1, 63};
  while (counts.size() < 16) counts.push_back(rnd::uniform_below(rng, 65));
  const auto m = make_problem(gemm::GroupLayout::kMasked, counts, 64, 256, 512, fmt::ScaleFormat::kUe8m0, seed + 101,
                              Data::kSmallIntegers);
  for (const auto& c : kSwapAbConfigs) check_bf16(m, c, true);
  const auto normal =
      make_problem(gemm::GroupLayout::kMasked, counts, 64, 384, 512, fmt::ScaleFormat::kFp32, seed + 102);
  for (const auto& c : kSwapAbConfigs) check_bf16(normal, c, true);
}

// The swap-AB core at a layer's K (7168: 56 K blocks) and n 2048 (16 weight tiles per expert), masked decode
// (max_m 64): bitwise equal to the two-halves core's 64 x 256 kernel, which is held to the model first
// (exact-accumulation data).
TEST(GroupedGemm, SwapAbAtLayerShape) {
  const uint64_t seed = printed_seed();
  const auto p = make_problem(gemm::GroupLayout::kMasked, {1, 8, 0, 17, 33, 64}, 64, 2048, 7168,
                              fmt::ScaleFormat::kUe8m0, seed, Data::kSmallIntegers);
  std::vector<Config> configs = {{64, 256, 0}};
  configs.insert(configs.end(), kSwapAbConfigs.begin(), kSwapAbConfigs.end());
  check_bf16_configs_agree(p, configs, true);
}

// Every K the planner accepts against the B scales' shared-memory chunks of the standalone FP8 kernels
// (plan::kGemmSfbChunkKBlocks K blocks per chunk, math.cuh): K blocks not a multiple of the chunk, one chunk and a
// chunk of one block, two full chunks and a partial third; contiguous and masked, a partial last n-block (n 384 with
// BLOCK_N 256). Exact-accumulation data: a B scale read from the wrong K block or column block shows bitwise.
TEST(GroupedGemm, KAcrossBScaleChunks) {
  const uint64_t seed = printed_seed();
  constexpr int kChunk = symmoe::plan::kGemmSfbChunkKBlocks;
  const std::vector<Config> configs = {{128, 256, 0, -1}, {64, 256, 0}, {128, 128, 0, 0, 0, 1}, {128, 256, 0, 1},
                                       {128, 256, 5, -1}, {64, 256, 3}, {16, 0, 0, 0, 0, 3},    {64, 0, 3, 0, 0, 3}};
  for (const int kb : {kChunk + 1, 2 * kChunk + 3}) {
    SCOPED_TRACE("K blocks " + std::to_string(kb));
    const auto c = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 129, 3}, 128, 384, 128 * kb,
                                fmt::ScaleFormat::kFp32, seed + kb, Data::kSmallIntegers);
    check_bf16_configs_agree(c, configs, true);
    const auto m = make_problem(gemm::GroupLayout::kMasked, {1, 0, 5}, 8, 384, 128 * kb, fmt::ScaleFormat::kUe8m0,
                                seed + kb + 1, Data::kSmallIntegers);
    check_bf16_configs_agree(m, configs, true);
  }
}

// The layer shapes' K (2048 = 16 K blocks, 7168 = 56: one partial B-scale chunk) with expert row counts 0, 1, 127,
// 129 and 386 (several m-blocks, partial last ones), n 384 (a partial last n-block for BLOCK_N 256).
TEST(GroupedGemm, ContiguousRowCountsAtLayerK) {
  const uint64_t seed = printed_seed();
  const std::vector<Config> configs =
      with_cores({{128, 256, 0, -1}, {64, 256, 0}, {128, 128, 0, 0, 0, 1}, {128, 256, 0, 1}, {0, 0, 0}});
  for (const int k : {2048, 7168}) {
    SCOPED_TRACE("K " + std::to_string(k));
    const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 127, 129, 386}, 128, 384, k,
                                fmt::ScaleFormat::kFp32, seed + k, Data::kSmallIntegers);
    check_bf16_configs_agree(p, configs, true);
  }
}

// The one-batch core stages a tile's B scales for every K block at once (plan::kGemmCoreMaxKBlocks): the largest K
// it takes, with a 192-column tile that starts inside a scale block and a partial last one (n 512: n-blocks at
// columns 0, 192, 384) and exact-accumulation data, bitwise against the two-halves core; one K block more is refused
// before any launch.
TEST(GroupedGemm, OneBatchCoreAtItsLargestK) {
  const uint64_t seed = printed_seed();
  constexpr int kMaxK = 128 * symmoe::plan::kGemmCoreMaxKBlocks;
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 129, 3}, 128, 512, kMaxK, fmt::ScaleFormat::kFp32,
                              seed, Data::kSmallIntegers);
  check_bf16_configs_agree(p, with_one_batch({{128, 128, 0, 0, 0, 1}}), true);
  const auto q = make_problem(gemm::GroupLayout::kContiguous, {1}, 128, 256, kMaxK + 128, fmt::ScaleFormat::kFp32,
                              seed + 1, Data::kSmallIntegers);
  Bf16Device device(q);
  const auto poisoned = device.d.download();
  try {
    gemm::grouped_gemm_bf16(device.dev.input(q), device.d.ptr, nullptr, launch_options({128, 192, 0, 0, 1, 2}));
    ADD_FAILURE() << "k " << kMaxK + 128 << " was accepted by the one-batch core";
  } catch (const symmoe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("k="), std::string::npos) << e.what();
  }
  sync_kernels();
  EXPECT_TRUE(symmoe::test::bitwise_equal(poisoned, device.d.download(), "D after a refused call"));
}

// The one-batch core's split-N 64 x 256 bf16 tile (warpgroup w: columns [128 w, 128 w + 128) of the 64 rows, one n128
// batch per K block, math.cuh's promotion) against the two-halves core's 64 x 256 kernel, bitwise (padding rows
// included), the two-halves kernel against the golden model: contiguous with partial m-blocks (1, 63, 65, 129 rows)
// and empty experts, n 640 (last n-block 128 columns: warpgroup 1's columns and scale block past n, not stored), K 640
// (5 K blocks over the 4 stages), normal and exact-accumulation data; masked (300 > max_m: clamped); all SMs and few
// CTAs; and at the largest K its per-tile B-scale buffer takes (plan::kGemmCoreMaxKBlocks).
TEST(GroupedGemm, OneBatchSplitNBitwiseToTwoHalves) {
  const uint64_t seed = printed_seed();
  const std::vector<Config> configs = {{64, 256, 0, 0, 0, 1}, {64, 256, 0, 0, 0, 2}, {64, 256, 3, 0, 0, 2}};
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 63, 64, 65, 129, 300, 0}, 64, 640, 640,
                              fmt::ScaleFormat::kFp32, seed);
  check_bf16_configs_agree(p, configs, false);
  const auto x = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 63, 64, 65, 129, 300, 0}, 64, 640, 640,
                              fmt::ScaleFormat::kFp32, seed + 1, Data::kSmallIntegers);
  check_bf16_configs_agree(x, configs, true);
  const auto m = make_problem(gemm::GroupLayout::kMasked, {0, 1, 16, 64, 129, 300}, 192, 512, 384,
                              fmt::ScaleFormat::kUe8m0, seed + 2);
  check_bf16_configs_agree(m, configs, false);
  constexpr int kMaxK = 128 * symmoe::plan::kGemmCoreMaxKBlocks;
  const auto deep = make_problem(gemm::GroupLayout::kContiguous, {0, 129, 3}, 64, 512, kMaxK, fmt::ScaleFormat::kFp32,
                                 seed + 3, Data::kSmallIntegers);
  check_bf16_configs_agree(deep, configs, true);
}

// FP8 value of code q at scale s and its ulp (one step of the e4m3 grid at that magnitude).
double e4m3_ulp(uint8_t q) {
  const float v = std::fabs(fmt::e4m3_to_float(q));
  if (v < 0x1p-6f) return 0x1p-9;
  return std::exp2(std::floor(std::log2(double(v))) - 3);
}

// The L1 kernel's outputs: e4m3 codes [total rows, n / 2] and the row scales [n / 256, scale stride], both poisoned
// (0xFF) before the call.
struct L1Output {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

// Runs the L1 GEMM (SwiGLU + FP8) with config c on the problem's weights, interleaved (transform_l1_weights), and the
// row weights of row_weights_for(p).
std::vector<float> row_weights_for(const Problem& p) {
  std::mt19937_64 rng(p.k * 7 + p.n);
  std::vector<float> weights(p.total_rows());
  for (auto& w : weights) w = float(0.05 + rnd::uniform01(rng));
  return weights;
}
L1Output run_l1(const Problem& p, float clamp, const Config& c) {
  const int inter = p.n / 2, kb = p.k / 128, total = p.total_rows();
  std::vector<uint8_t> b_data, t_data(size_t(p.num_experts) * p.n * p.k);
  std::vector<float> b_scales, t_scales(size_t(p.num_experts) * (inter / 128) * kb * 2);
  concat_weights(p, b_data, b_scales);
  gemm::transform_l1_weights(b_data.data(), b_scales.data(), p.num_experts, inter, p.k, t_data.data(), t_scales.data());
  DeviceInputs dev(p, t_data, t_scales);
  DeviceArray<float> d_weights(row_weights_for(p));
  DeviceArray<uint8_t> out(size_t(total) * inter);
  const int scale_stride = gemm::sfa_stride_for(total);
  DeviceArray<float> out_scales(size_t(inter / 128) * scale_stride);
  out.poison();
  out_scales.poison();
  gemm::SwigluFp8Output o;
  o.out = out.ptr, o.out_scales = out_scales.ptr, o.out_scale_stride = scale_stride, o.row_weights = d_weights.ptr;
  o.clamp = clamp;
  gemm::grouped_gemm_swiglu_fp8(dev.input(p), o, nullptr, launch_options(c));
  sync_kernels();
  return {out.download(), out_scales.download()};
}

// The L1 outputs of every config in `configs` bitwise equal to the first's (same arithmetic: the two-halves and the
// one-batch cores promote the same WGMMA partial sums in the same order).
void check_l1_configs_agree(const Problem& p, float clamp, const std::vector<Config>& configs) {
  ASSERT_FALSE(configs.empty());
  const L1Output first = run_l1(p, clamp, configs[0]);
  for (size_t i = 1; i < configs.size(); ++i) {
    SCOPED_TRACE(name(configs[i]) + " clamp " + std::to_string(clamp));
    const L1Output other = run_l1(p, clamp, configs[i]);
    const std::string what = name(configs[i]) + " vs " + name(configs[0]);
    EXPECT_TRUE(symmoe::test::bitwise_equal(first.codes, other.codes, what + ": codes"));
    EXPECT_TRUE(symmoe::test::bitwise_equal(first.scales, other.scales, what + ": scales"));
  }
}

// L1: kernel output (with interleaved weights) vs ref::l1_epilogue over ref::gemm_faithful (original weights).
void check_l1(const Problem& p, float clamp, const Config& c, bool exact_acc) {
  SCOPED_TRACE(name(c) + " clamp " + std::to_string(clamp));
  const int inter = p.n / 2, total = p.total_rows();
  const std::vector<float> weights = row_weights_for(p);
  const int scale_stride = gemm::sfa_stride_for(total);
  const L1Output output = run_l1(p, clamp, c);
  const std::vector<uint8_t>& got = output.codes;
  const std::vector<float>& got_scales = output.scales;
  std::ostringstream first_offenders;
  size_t num_values = 0, num_exact = 0, num_over_ulp = 0, num_beyond_one_ulp = 0, num_scale_diff = 0, overwritten = 0;
  std::vector<double> ref_deq, got_deq;
  std::vector<char> written(total, 0);
  const symmoe::test::GemmModelRows& model =
      symmoe::test::gemm_model_rows(p, [&](int e) -> const symmoe::Fp8BlockWeights& { return p.b[e]; });
  for (int e = 0; e < p.num_experts; ++e) {
    const int r0 = p.starts[e], rows = p.valid[e];
    if (rows == 0) continue;
    const auto first = model.faithful.begin() + std::ptrdiff_t(model.expert_offset[e]);
    const std::vector<float> acc(first, first + std::ptrdiff_t(size_t(rows) * p.n));  // ref::gemm_faithful
    const std::vector<float> w(weights.begin() + r0, weights.begin() + r0 + rows);
    const auto want = ref::l1_epilogue(acc, rows, inter, w, clamp);
    for (int r = 0; r < rows; ++r) {
      written[r0 + r] = 1;
      for (int j = 0; j < inter / 128; ++j) {
        const float ws = want.scales[size_t(r) * (inter / 128) + j];
        const float gs = got_scales[size_t(j) * scale_stride + r0 + r];
        num_scale_diff += ws != gs;
        for (int i = 128 * j; i < 128 * j + 128; ++i) {
          const uint8_t wq = want.data[size_t(r) * inter + i], gq = got[size_t(r0 + r) * inter + i];
          const double wv = double(fmt::e4m3_to_float(wq)) * ws, gv = double(fmt::e4m3_to_float(gq)) * gs;
          // One e4m3 ulp. On normal data the GEMM inputs of the epilogue already differ: Hopper's FP8 WGMMA
          // accumulates with fewer bits than fp32 (the reason for per-128 promotion), ~1e-4 of the summed
          // magnitudes, which is large for small, cancelling gate/up values. So there the bound is one ulp plus
          // 2^-7 of the block's range (448 * scale), and a rare element (a sign flip of a near-zero gate or up
          // value; 1 in 39168 seen) may exceed even that. The exact-accumulation data checks the epilogue itself:
          // there every element is within one ulp.
          const double ulp = std::max(e4m3_ulp(wq) * ws, e4m3_ulp(gq) * gs);
          const double tol = (ulp + (exact_acc ? 0.0 : 0x1p-7 * 448.0 * ws)) * (1 + 1e-9);
          num_beyond_one_ulp += std::fabs(wv - gv) > ulp * (1 + 1e-9);
          ++num_values;
          num_exact += wq == gq && ws == gs;
          if (!(std::fabs(wv - gv) <= tol)) {
            if (num_over_ulp < 5)
              first_offenders << "\n  expert " << e << " row " << r << " channel " << i << ": want " << wv << " (code "
                              << int(wq) << ", scale " << ws << ") got " << gv << " (code " << int(gq) << ", scale "
                              << gs << ")";
            ++num_over_ulp;
          }
          ref_deq.push_back(wv);
          got_deq.push_back(gv);
        }
      }
    }
  }
  for (int r = 0; r < total; ++r)
    if (!written[r]) {
      for (int i = 0; i < inter; ++i) overwritten += got[size_t(r) * inter + i] != 0xFF;
      for (int j = 0; j < inter / 128; ++j) {
        uint32_t bits;
        std::memcpy(&bits, &got_scales[size_t(j) * scale_stride + r], 4);
        overwritten += bits != 0xFFFFFFFFu;
      }
    }
  const double err = symmoe::test::rel_frobenius(ref_deq, got_deq);
  std::printf(
      "    [%s clamp %g %s] %zu values: %zu bitwise equal, %zu beyond one ulp, %zu beyond tolerance, "
      "%zu scales differ, rel err %.2e\n",
      name(c).c_str(), clamp, exact_acc ? "exact-acc" : "normal", num_values, num_exact, num_beyond_one_ulp,
      num_over_ulp, num_scale_diff, err);
  const size_t allowed_over = exact_acc ? 0 : std::max<size_t>(1, num_values / 10000);
  EXPECT_LE(num_over_ulp, allowed_over) << "elements beyond tolerance; first:" << first_offenders.str();
  EXPECT_LE(double(num_scale_diff), 1e-3 * double(num_values / 128) + 2) << "scales differ beyond rare boundary cases";
  if (exact_acc) {
    EXPECT_GE(double(num_exact), 0.999 * double(num_values)) << "exact accumulation: expf ulps only";
    EXPECT_LE(err, 1e-3);
  } else {
    EXPECT_LE(double(num_beyond_one_ulp), 2e-3 * double(num_values));
    // Aggregate: every code that differs by one ulp (allowed above) is off by 6-12% of its value, so ~1% of codes
    // differing (seen: 0.83%, seed 14653519267486935069, 2026-11-30; all tile configs bitwise equal to each
    // other) already gives ~7e-3. The element-wise bounds above are the check; this one catches systematic error.
    EXPECT_LE(err, 1.5e-2);
  }
  EXPECT_EQ(overwritten, 0u) << "elements or scales written outside the experts' valid rows";
}

TEST(GroupedGemmL1, ContiguousSwigluFp8) {
  const uint64_t seed = printed_seed();
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 127, 129, 64, 300, 0}, 64, 512, 384,
                              fmt::ScaleFormat::kFp32, seed);
  for (float clamp : {0.f, 0.75f})
    for (const auto& c : kL1Configs) check_l1(p, clamp, c, false);
  const auto x = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 127, 129, 64, 300, 0}, 64, 512, 384,
                              fmt::ScaleFormat::kFp32, seed + 1, Data::kSmallIntegers);
  for (float clamp : {0.f, 3.f})
    for (const auto& c : kL1Configs) check_l1(x, clamp, c, true);
}

TEST(GroupedGemmL1, MaskedSwigluFp8) {
  const uint64_t seed = printed_seed();
  const auto p =
      make_problem(gemm::GroupLayout::kMasked, {0, 1, 16, 129, 200}, 160, 256, 512, fmt::ScaleFormat::kUe8m0, seed);
  for (const auto& c : kL1Configs) check_l1(p, 0.5f, c, false);
  const auto x = make_problem(gemm::GroupLayout::kMasked, {0, 1, 16, 129, 200}, 160, 256, 512, fmt::ScaleFormat::kUe8m0,
                              seed + 1, Data::kSmallIntegers);
  for (const auto& c : kL1Configs) check_l1(x, 2.f, c, true);
}

// The SwiGLU kernels' (gate, up) B-scale pairs across shared-memory chunks (math.cuh): two full chunks and a partial
// third (plan::kGemmSfbChunkKBlocks), contiguous and masked, every compiled L1 tile.
TEST(GroupedGemmL1, SwigluFp8KAcrossBScaleChunks) {
  const uint64_t seed = printed_seed();
  const int k = 128 * (2 * symmoe::plan::kGemmSfbChunkKBlocks + 3);
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 129, 3}, 64, 512, k, fmt::ScaleFormat::kFp32, seed,
                              Data::kSmallIntegers);
  for (const auto& c : {Config{64, 256, 0}, Config{128, 256, 0, 0, 0, 1}, Config{16, 0, 0, 0, 0, 3}})
    check_l1(p, 0.f, c, true);
  const auto m = make_problem(gemm::GroupLayout::kMasked, {1, 0, 5}, 8, 512, k, fmt::ScaleFormat::kUe8m0, seed + 1,
                              Data::kSmallIntegers);
  for (const auto& c : {Config{64, 256, 0}, Config{128, 256, 3, 0, 0, 1}, Config{32, 0, 3, 0, 0, 3}})
    check_l1(m, 2.f, c, true);
}

// The one-batch core's SwiGLU tile (two n128 batches per K block into one partial, math.cuh's promotion) against the
// two-halves core's 128 x 256 kernel, bitwise (codes and scales): contiguous with partial m-blocks and a warpgroup
// without valid rows (rows 1, 64, 65, 127, 129), masked, normal and exact-accumulation data, with and without the
// clamp, all SMs and few CTAs; and at the largest K its per-tile B-scale buffer takes (plan::kGemmCoreMaxKBlocks).
TEST(GroupedGemmL1, OneBatchCoreBitwiseToTwoHalves) {
  const uint64_t seed = printed_seed();
  std::vector<Config> configs = {{128, 256, 0, 0, 0, 1}};
  configs.insert(configs.end(), kOneBatchL1Configs.begin(), kOneBatchL1Configs.end());
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 64, 65, 127, 129, 300, 0}, 64, 768, 640,
                              fmt::ScaleFormat::kFp32, seed);
  for (float clamp : {0.f, 0.75f}) check_l1_configs_agree(p, clamp, configs);
  const auto x = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 64, 65, 127, 129, 300, 0}, 64, 768, 640,
                              fmt::ScaleFormat::kFp32, seed + 1, Data::kSmallIntegers);
  check_l1_configs_agree(x, 3.f, configs);
  const auto m =
      make_problem(gemm::GroupLayout::kMasked, {0, 1, 16, 129, 200}, 160, 512, 512, fmt::ScaleFormat::kUe8m0, seed + 2);
  check_l1_configs_agree(m, 0.5f, configs);
  constexpr int kMaxK = 128 * symmoe::plan::kGemmCoreMaxKBlocks;
  const auto deep = make_problem(gemm::GroupLayout::kContiguous, {0, 129, 3}, 128, 512, kMaxK, fmt::ScaleFormat::kFp32,
                                 seed + 3, Data::kSmallIntegers);
  check_l1_configs_agree(deep, 0.f, configs);
}

// The one-batch core's split-N 64 x 256 SwiGLU tile (one n128 batch per K block per warpgroup; the row amax crosses the
// warpgroups over kCoreAmaxBarrier, the two share the one output atom) against the two-halves core's 64 x 256 kernel,
// bitwise (codes and scales), the two-halves kernel against the golden model (ref::l1_epilogue over
// ref::gemm_faithful): contiguous with partial m-blocks (1, 63, 65, 129 rows) and empty experts, masked, normal and
// exact-accumulation data, with and without the clamp, all SMs and few CTAs (many tiles per CTA: both amax parities,
// the shared atom's store waited on before the next tile writes it); and at the largest K its per-tile B-scale buffer
// takes.
TEST(GroupedGemmL1, OneBatchSplitNBitwiseToTwoHalves) {
  const uint64_t seed = printed_seed();
  std::vector<Config> configs = {{64, 256, 0, 0, 0, 1}};
  configs.insert(configs.end(), kOneBatchSplitNL1Configs.begin(), kOneBatchSplitNL1Configs.end());
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 63, 64, 65, 129, 300, 0}, 64, 768, 640,
                              fmt::ScaleFormat::kFp32, seed);
  for (float clamp : {0.f, 0.75f}) {
    check_l1(p, clamp, configs[0], false);
    check_l1_configs_agree(p, clamp, configs);
  }
  const auto x = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 63, 64, 65, 129, 300, 0}, 64, 768, 640,
                              fmt::ScaleFormat::kFp32, seed + 1, Data::kSmallIntegers);
  check_l1(x, 3.f, configs[0], true);
  check_l1_configs_agree(x, 3.f, configs);
  const auto m =
      make_problem(gemm::GroupLayout::kMasked, {0, 1, 16, 129, 200}, 160, 512, 512, fmt::ScaleFormat::kUe8m0, seed + 2);
  check_l1(m, 0.5f, configs[0], false);
  check_l1_configs_agree(m, 0.5f, configs);
  constexpr int kMaxK = 128 * symmoe::plan::kGemmCoreMaxKBlocks;
  const auto deep = make_problem(gemm::GroupLayout::kContiguous, {0, 129, 3}, 64, 512, kMaxK, fmt::ScaleFormat::kFp32,
                                 seed + 3, Data::kSmallIntegers);
  check_l1_configs_agree(deep, 0.f, configs);
}

// The swap-AB core's L1 tiles at decode row counts (as GroupedGemm.SwapAbDecodeRowCounts): contiguous with segments
// at any row, masked with max_m 64 and random counts in [0, 64], n 512 (two 256-row L1 tiles).
TEST(GroupedGemmL1, SwapAbDecodeRowCounts) {
  const uint64_t seed = printed_seed();
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 5, 16, 17, 32, 33, 70, 64, 0, 129}, 1, 512, 640,
                              fmt::ScaleFormat::kFp32, seed, Data::kSmallIntegers);
  for (const auto& c : kSwapAbL1Configs) check_l1(p, 0.f, c, true);
  std::mt19937_64 rng(seed + 100);
  std::vector<int> counts = {0, 64, 1, 63};
  while (counts.size() < 16) counts.push_back(rnd::uniform_below(rng, 65));
  const auto m = make_problem(gemm::GroupLayout::kMasked, counts, 64, 512, 512, fmt::ScaleFormat::kUe8m0, seed + 1);
  for (const auto& c : kSwapAbL1Configs) check_l1(m, 0.75f, c, false);
}

// The golden model's FP8 accumulation (ref::gemm_faithful over reference/wgmma.hpp: the tensor core's 13-bit
// aligned, truncated sums) on normal data, where plain fp32 partial sums miss the GPU on a few % of bf16 values:
// bf16 D bitwise equal to bf16(ref::gemm_faithful) for every tile shape, and the L1 epilogue's
// codes held to the exact-accumulation bound (within one e4m3 ulp everywhere, >= 99.9% bitwise: expf ulps only).
TEST(GroupedGemmFaithful, Bf16BitwiseOnNormalData) {
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 127, 129, 256, 64}, 128, 384, 512,
                              fmt::ScaleFormat::kFp32, fresh_seed());
  for (const auto& c : {Config{128, 256, 0, -1}, Config{64, 256, 5}, Config{128, 128, 3}, Config{0, 0, 0},
                        Config{16, 0, 0, 0, 0, 3}, Config{32, 0, 0, 0, 0, 3}, Config{64, 0, 0, 0, 0, 3}})
    check_bf16(p, c, /*expect_bitwise=*/true);
  const auto m = make_problem(gemm::GroupLayout::kMasked, {0, 1, 16, 129, 200}, 160, 256, 512, fmt::ScaleFormat::kUe8m0,
                              fresh_seed());
  for (const auto& c : {Config{128, 256, 0}, Config{0, 0, 0}, Config{16, 0, 0, 0, 0, 3}, Config{32, 0, 0, 0, 0, 3},
                        Config{64, 0, 0, 0, 0, 3}})
    check_bf16(m, c, /*expect_bitwise=*/true);
}

TEST(GroupedGemmFaithful, L1CodesOnNormalData) {
  const auto p = make_problem(gemm::GroupLayout::kContiguous, {0, 1, 127, 129, 64, 300, 0}, 64, 512, 384,
                              fmt::ScaleFormat::kFp32, fresh_seed());
  for (float clamp : {0.f, 0.75f})
    for (const auto& c : {Config{64, 256, 0}, Config{128, 256, 0}, Config{0, 0, 0}, Config{16, 0, 0, 0, 0, 3},
                          Config{64, 0, 0, 0, 0, 3}})
      check_l1(p, clamp, c, /*exact_acc=*/true);
}

}  // namespace
