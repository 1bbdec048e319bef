// Planner property tests: every deployment of the sweep gets valid EP, grouped-GEMM and MegaMoE plans (stages >= 2,
// shared memory and registers fit, tiles legal for WGMMA, waves divide the local experts, sizes match the
// layouts); bad input raises a clear symmoe::Error; overrides apply and are checked.
#include <algorithm>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "layout/mega_roles.hpp"
#include "plan/gemm_kernels.hpp"
#include "plan/mega_kernels.hpp"
#include "symmoe/plan.hpp"
#include "test_plan_sweep.hpp"

namespace symmoe {
namespace {

using plan::hopper::kMaxSmemPerBlock;
using plan::hopper::kRegisterBudget;
const plan::PlanOverrides kNoOverrides{};  // hermetic: ignore the SYMMOE_ environment

// Expect a symmoe::Error whose message contains `needle`.
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected a symmoe::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(e.component().empty(), false);
  }
}

// A fused kernel's GEMM-core shared memory from the standalone cores' model: the core's own, except that the
// one-batch core (BLOCK_M 128, FP8 64) has the staging rows in place of its standalone SwiGLU kernel's output tile
// and stages B scales for fewer K blocks (plan::kGemmCoreFusedMaxKBlocks).
int fused_core_smem_bytes(const plan::MegaKernelShape& k) {
  const plan::GemmCore core = plan::mega_core(k.block_m, k.weights);
  if (core != plan::GemmCore::kOneBatch)
    return plan::gemm_smem_bytes(k.block_m, k.block_n, k.num_stages, false, k.weights, false, core);
  return plan::gemm_smem_bytes(k.block_m, k.block_n, k.num_stages, false, k.weights, false, core,
                               plan::GemmEpilogue::kSwigluFp8) -
         plan::gemm_core_out_bytes(k.block_m, k.block_n, plan::GemmCoreOutput::kFp8Tile) + plan::kGemmStagingBytes -
         plan::gemm_core_sfb_bytes(plan::GemmCoreOutput::kFp8Tile) +
         plan::gemm_core_sfb_bytes(plan::GemmCoreOutput::kStagingRows);
}

void check_gemm(const plan::GemmPlan& p) {
  ASSERT_NO_THROW(p.validate()) << p.to_string();
  ASSERT_GE(p.num_stages, 2) << p.to_string();
  ASSERT_LE(p.smem_bytes, kMaxSmemPerBlock) << p.to_string();
  ASSERT_EQ(p.smem_bytes, p.smem_fixed + p.num_stages * p.smem_per_stage);
  ASSERT_LE(128 * (p.producer_registers + p.num_math_warpgroups * p.math_registers), kRegisterBudget);
  ASSERT_LE(p.math_registers_needed, p.math_registers) << p.to_string();
  ASSERT_EQ(p.wg_tile_m % 64, 0);
  ASSERT_TRUE(p.wg_tile_n % 8 == 0 && p.wg_tile_n >= 8 && p.wg_tile_n <= 256) << p.to_string();
  // At most one 64 x 256 fp32 accumulator per warpgroup (the 128 x 256 kernels), next to the 64-register partial; the
  // one-batch core's partial is as wide as its accumulator up to 64 x 192 (96 + 96 registers), half of it at 256
  // columns (64 + 128).
  const int final_acc = p.wg_tile_m * p.wg_tile_n / 128;
  ASSERT_LE(final_acc, 128) << p.to_string();
  if (p.core == plan::GemmCore::kOneBatch) {
    ASSERT_LE(final_acc + final_acc / plan::gemm_core_num_halves(p.block_m, p.block_n), 192) << p.to_string();
  }
  // The plan is a compiled kernel, and its shared memory is that kernel's.
  bool compiled = false;
  for (const plan::GemmKernelShape& k : plan::kGemmKernels)
    compiled = compiled || (k.block_m == p.block_m && k.block_n == p.block_n && k.num_stages == p.num_stages &&
                            k.cluster_size == p.cluster_size && k.epilogue == p.epilogue && k.core == p.core);
  ASSERT_TRUE(compiled) << p.to_string();
  // B scales in shared memory exactly for the standalone FP8 kernels (plan::gemm_b_scales_in_smem), counted.
  ASSERT_EQ(p.b_scales_smem, p.weights == plan::GemmWeights::kFp8) << p.to_string();
  ASSERT_EQ(p.smem_bytes, plan::gemm_smem_bytes(p.block_m, p.block_n, p.num_stages, p.tile_buffer, p.weights,
                                                p.b_scales_smem, p.core, p.epilogue))
      << p.to_string();
  // The two warpgroups cover the block exactly: tokens x channels = 2 warpgroup tiles.
  ASSERT_EQ(2 * p.wg_tile_m * p.wg_tile_n, p.block_m * p.block_n) << p.to_string();
  if (p.epilogue == plan::GemmEpilogue::kSwigluFp8) {
    ASSERT_EQ(p.block_n, 256);
  }
  ASSERT_EQ(p.num_sms % p.cluster_size, 0);
}

TEST(Plan, EveryDeployment) {
  int num_checked = 0;
  for (const int num_sms : {132, 66, 33}) {
    test::for_each_deployment([&](const std::string&, const MoeShape& s) {
      num_checked += 1;
      SCOPED_TRACE(s.to_string() + " sms=" + std::to_string(num_sms));
      // EP
      for (const auto dtype : {layout::TokenDtype::kBf16, layout::TokenDtype::kFp8E4m3}) {
        const plan::EpPlan ep = plan::plan_ep(s, dtype, num_sms, kNoOverrides);
        ASSERT_NO_THROW(ep.validate());
        ASSERT_GE(ep.dispatch_sms, 1);
        ASSERT_LE(ep.dispatch_sms, std::min(num_sms, 24));
        ASSERT_GE(ep.combine_sms, 1);
        ASSERT_LE(ep.combine_sms, std::min(num_sms, 24));
        ASSERT_EQ(ep.buffer_bytes, layout::EpLayout(ep.dims()).num_bytes());
      }
      // MegaMoE
      const plan::MegaPlan m = plan::plan_mega_moe(s, num_sms, kNoOverrides);
      ASSERT_NO_THROW(m.validate());
      ASSERT_GE(m.num_stages, 2) << m.to_string();
      ASSERT_LE(m.smem_bytes, kMaxSmemPerBlock) << m.to_string();
      ASSERT_LE(128 * (m.data_registers + m.num_math_warpgroups * m.math_registers), kRegisterBudget);
      ASSERT_EQ(s.num_local_experts() % m.num_experts_per_wave, 0);
      ASSERT_EQ(m.num_waves * m.num_experts_per_wave, s.num_local_experts());
      ASSERT_EQ(m.l1_block_n, 256);
      ASSERT_EQ(m.pool_rows, layout::mega_pool_rows(m.dims()));
      ASSERT_EQ(m.workspace_bytes, layout::MegaLayout(m.dims()).num_bytes());
      ASSERT_EQ(m.pool_rows % m.block_m, 0u);
      // Experts per wave: the smallest divisor of El whose expected L1 blocks cover 2x the SMs (or all experts).
      const long long blocks = static_cast<long long>(m.num_experts_per_wave) * m.l1_blocks_per_expert;
      ASSERT_TRUE(blocks >= 2LL * num_sms || m.num_experts_per_wave == s.num_local_experts()) << m.to_string();
      for (int e = 1; e < m.num_experts_per_wave; ++e)
        ASSERT_FALSE(s.num_local_experts() % e == 0 &&
                     e * static_cast<long long>(m.l1_blocks_per_expert) >= 2LL * num_sms)
            << "a smaller divisor " << e << " fills the SMs: " << m.to_string();
      // Composed path GEMMs
      const double tokens = plan::expected_tokens_per_expert(s, s.num_max_tokens_per_rank);
      check_gemm(plan::plan_grouped_gemm(tokens, 2 * s.intermediate, s.hidden, s.num_local_experts(), num_sms,
                                         plan::GemmEpilogue::kSwigluFp8, kNoOverrides));
      check_gemm(plan::plan_grouped_gemm(tokens, s.hidden, s.intermediate, s.num_local_experts(), num_sms,
                                         plan::GemmEpilogue::kBf16, kNoOverrides));
    });
  }
  // 4 shapes x 31 rank counts x 41 token counts x 3 SM counts: the sweep really ran.
  EXPECT_EQ(num_checked, 3 * 31 * 41);
}

TEST(Plan, GroupedGemmSweep) {
  for (const double m : {0.0, 0.25, 1.0, 7.0, 8.0, 16.0, 31.0, 32.0, 33.0, 64.0, 100.0, 1000.0, 5000.0, 100000.0})
    for (const int e : {1, 8, 32, 256})
      for (const int sms : {1, 2, 33, 132})
        for (const auto& nk : {std::pair{4096, 7168}, std::pair{7168, 2048}, std::pair{6144, 7168}, std::pair{256, 256},
                               std::pair{7168, 3072}, std::pair{100, 128}}) {
          SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(nk.first) + " k=" + std::to_string(nk.second) +
                       " e=" + std::to_string(e) + " sms=" + std::to_string(sms));
          check_gemm(plan::plan_grouped_gemm(m, nk.first, nk.second, e, sms, plan::GemmEpilogue::kBf16, kNoOverrides));
          if (nk.first % 256 == 0)
            check_gemm(
                plan::plan_grouped_gemm(m, nk.first, nk.second, e, sms, plan::GemmEpilogue::kSwigluFp8, kNoOverrides));
        }
}

// Every compiled grouped-GEMM kernel is what the planner picks, unpinned over a sweep of problems or with a
// tile_buffer pin (the one pin that reaches 128 x 256 bf16 with slab staging): nothing is compiled for nothing.
TEST(Plan, EveryCompiledGemmKernelIsPlanned) {
  std::vector<char> planned(plan::kNumGemmKernels, 0);
  auto mark = [&](const plan::GemmPlan& p) {
    for (int i = 0; i < plan::kNumGemmKernels; ++i) {
      const plan::GemmKernelShape& k = plan::kGemmKernels[i];
      if (k.block_m == p.block_m && k.block_n == p.block_n && k.num_stages == p.num_stages &&
          k.cluster_size == p.cluster_size && k.epilogue == p.epilogue && k.tile_buffer == p.tile_buffer &&
          k.weights == p.weights && k.core == p.core)
        planned[i] = 1;
    }
  };
  // Both cores pinned (plan::GemmPins::core), both clusters for the one-batch core: the two-halves core's 128-row
  // kernels (bf16 and SwiGLU) are the bench's comparison for the one-batch core.
  for (const double m : {1000.0})
    for (const int n : {128, 256, 4096})
      for (const int tile_buffer : {0, -1}) {
        plan::GemmPins pins;
        pins.core = 1, pins.tile_buffer = tile_buffer;
        mark(plan::plan_grouped_gemm(m, n, 2048, 8, 132, plan::GemmEpilogue::kBf16, kNoOverrides, pins));
        if (n % 256 == 0 && tile_buffer == 0) {
          const plan::GemmPlan l1 =
              plan::plan_grouped_gemm(m, n, 2048, 8, 132, plan::GemmEpilogue::kSwigluFp8, kNoOverrides, pins);
          EXPECT_EQ(l1.core, plan::GemmCore::kTwoHalves) << l1.to_string();
          mark(l1);
        }
      }
  for (const double m : {16.0, 1000.0})
    for (const int n : {384, 4096})
      for (const int cluster : {1, 2}) {
        plan::GemmPins pins;
        pins.core = 2, pins.cluster_size = cluster;
        const plan::GemmPlan p =
            plan::plan_grouped_gemm(m, n, 2048, 8, 132, plan::GemmEpilogue::kBf16, kNoOverrides, pins);
        EXPECT_EQ(p.core, plan::GemmCore::kOneBatch) << p.to_string();
        check_gemm(p);
        mark(p);
        pins.block_n = 128;
        mark(plan::plan_grouped_gemm(m, n, 2048, 8, 132, plan::GemmEpilogue::kBf16, kNoOverrides, pins));
      }
  // The one-batch core's split-N 64 x 256 kernels (bf16, SwiGLU + FP8): the planner's 64-row tiles with FP8 weights,
  // pinned or not; the two-halves core's 64 x 256 kernels run when that core is pinned.
  for (const auto epilogue : {plan::GemmEpilogue::kBf16, plan::GemmEpilogue::kSwigluFp8}) {
    plan::GemmPins pins;
    pins.core = 2;
    const plan::GemmPlan p = plan::plan_grouped_gemm(16, 4096, 7168, 8, 132, epilogue, kNoOverrides, pins);
    EXPECT_EQ(p.core, plan::GemmCore::kOneBatch) << p.to_string();
    EXPECT_EQ(p.block_m, 64) << p.to_string();
    EXPECT_EQ(p.block_n, 256) << p.to_string();
    EXPECT_EQ(p.wg_tile_n, 128) << p.to_string();
    EXPECT_EQ(p.smem_bytes, epilogue == plan::GemmEpilogue::kBf16 ? 203328 : 221136) << p.to_string();
    check_gemm(p);
    mark(p);
    const plan::GemmPlan unpinned = plan::plan_grouped_gemm(16, 4096, 7168, 8, 132, epilogue, kNoOverrides);
    EXPECT_EQ(unpinned.core, plan::GemmCore::kOneBatch) << unpinned.to_string();
    EXPECT_EQ(unpinned.block_m, 64) << unpinned.to_string();
    EXPECT_EQ(unpinned.wg_tile_n, 128) << unpinned.to_string();
    pins = {};
    pins.block_m = 64, pins.block_n = 256;
    EXPECT_EQ(plan::plan_grouped_gemm(16, 4096, 7168, 8, 132, epilogue, kNoOverrides, pins).core,
              plan::GemmCore::kOneBatch);
    pins.core = 1;
    const plan::GemmPlan two_halves = plan::plan_grouped_gemm(16, 4096, 7168, 8, 132, epilogue, kNoOverrides, pins);
    EXPECT_EQ(two_halves.core, plan::GemmCore::kTwoHalves) << two_halves.to_string();
    mark(two_halves);
    // k past the one-batch core's B-scale buffer: the two-halves core.
    EXPECT_EQ(
        plan::plan_grouped_gemm(16, 4096, 128 * (plan::kGemmCoreMaxKBlocks + 1), 8, 132, epilogue, kNoOverrides).core,
        plan::GemmCore::kTwoHalves);
  }
  for (const double m : {1.0, 16.0, 64.0, 1000.0})
    for (const int n : {128, 256, 384, 4096})
      for (const auto epilogue : {plan::GemmEpilogue::kBf16, plan::GemmEpilogue::kSwigluFp8})
        for (const int tile_buffer : {0, -1}) {
          if (epilogue == plan::GemmEpilogue::kSwigluFp8 && (n % 256 != 0 || tile_buffer != 0)) continue;
          plan::GemmPins pins;
          pins.tile_buffer = tile_buffer;
          mark(plan::plan_grouped_gemm(m, n, 2048, 8, 132, epilogue, kNoOverrides, pins));
          if (tile_buffer == 0) {
            const plan::GemmPlan fp4 =
                plan::plan_grouped_gemm(m, n, 2048, 8, 132, epilogue, kNoOverrides, {}, plan::GemmWeights::kFp4);
            EXPECT_EQ(fp4.weights, plan::GemmWeights::kFp4);
            EXPECT_NO_THROW(fp4.validate()) << fp4.to_string();
            mark(fp4);
            plan::GemmPins two_halves;  // its FP4 64-row tiles: pinned only (the swap-AB core takes decode sizes)
            two_halves.core = 1;
            mark(plan::plan_grouped_gemm(m, n, 2048, 8, 132, epilogue, kNoOverrides, two_halves,
                                         plan::GemmWeights::kFp4));
          }
        }
  // The swap-AB core (core 3 pinned only): each of its kernels from the ladder (16 / 32 / 64 tokens for 8 / 16 / 100
  // expected rows, x2 imbalance) and from a block_m pin, FP8 and FP4 weights, both epilogues.
  for (const auto weights : {plan::GemmWeights::kFp8, plan::GemmWeights::kFp4})
    for (const auto epilogue : {plan::GemmEpilogue::kBf16, plan::GemmEpilogue::kSwigluFp8})
      for (const double m : {8.0, 16.0, 100.0})
        for (const int block_m : {0, 16, 32, 64})
          for (const int block_n : {0, 128, 256}) {
            if (block_n == 128 && epilogue == plan::GemmEpilogue::kSwigluFp8) continue;  // the SwiGLU tile is 256
            plan::GemmPins pins;
            pins.core = 3, pins.block_m = block_m, pins.block_n = block_n;
            const plan::GemmPlan p =
                plan::plan_grouped_gemm(m, 4096, 7168, 8, 132, epilogue, kNoOverrides, pins, weights);
            EXPECT_EQ(p.core, plan::GemmCore::kSwapAB) << p.to_string();
            EXPECT_EQ(p.block_m, block_m ? block_m : m == 8.0 ? 16 : m == 16.0 ? 32 : 64) << p.to_string();
            if (block_n) {
              EXPECT_EQ(p.block_n, block_n) << p.to_string();
            }
            check_gemm(p);
            mark(p);
          }
  for (int i = 0; i < plan::kNumGemmKernels; ++i)
    EXPECT_TRUE(planned[i]) << "kGemmKernels[" << i << "] (block " << plan::kGemmKernels[i].block_m << "x"
                            << plan::kGemmKernels[i].block_n << ", stages " << plan::kGemmKernels[i].num_stages
                            << ") is compiled and never planned";
}

TEST(Plan, BlockMLadder) {
  // The fused kernel uses the compiled GEMM cores (plan::kMegaKernels): decode 16-token swap-AB tiles (each warpgroup
  // 128 weight rows x 16 tokens), then 32, 64 and, for large batches, 128-row tiles; BLOCK_M never shrinks as tokens
  // grow.
  const plan::MegaPlan decode = plan::plan_mega_moe(named_shape("v3", 8, 1), 132, kNoOverrides);
  EXPECT_EQ(decode.block_m, 16);
  EXPECT_EQ(decode.core, plan::GemmCore::kSwapAB);
  EXPECT_EQ(decode.l1_wg_tile_m, 128);
  EXPECT_EQ(decode.l1_wg_tile_n, 16);
  EXPECT_NE(decode.to_string().find("swap-ab: tokens on WGMMA N"), std::string::npos) << decode.to_string();
  const plan::MegaPlan mid = plan::plan_mega_moe(named_shape("v3", 8, 150), 132, kNoOverrides);
  EXPECT_EQ(mid.block_m, 64);
  EXPECT_EQ(mid.core, plan::GemmCore::kOneBatch);
  EXPECT_EQ(mid.l1_wg_tile_n, 128);  // the warpgroups split the 256 interleaved columns
  const plan::MegaPlan prefill = plan::plan_mega_moe(named_shape("v3", 8, 8192), 132, kNoOverrides);
  EXPECT_EQ(prefill.block_m, 128);
  EXPECT_EQ(prefill.l1_wg_tile_m, 64);
  EXPECT_EQ(prefill.l1_wg_tile_n, 256);  // the warpgroups split the rows, two 128-column halves each
  // The grouped GEMM goes to 128-row tiles for large batches (SwiGLU: 128 x 256), 64-row tiles when an expert holds
  // <= 32 tokens (x2 imbalance <= 64) (the kernels compiled: plan::kGemmKernels).
  // bf16 at 128-row tiles: the one-batch core, 128 x 192; clusters of 2 wherever an expert is expected to hold
  // two or more m-blocks (1500 rows: 12; 300: 3; 1536; 256; 192), single CTAs at one (100 rows). SwiGLU: the one-batch
  // core's 128 x 256 tile (clusters of 2 as for bf16) where k fits its per-tile B-scale buffer
  // (plan::kGemmCoreMaxKBlocks), else the two-halves core's.
  for (const double rows : {1500.0, 300.0, 1536.0, 256.0, 192.0, 100.0}) {
    const plan::GemmPlan bf16 =
        plan::plan_grouped_gemm(rows, 4096, 7168, 32, 132, plan::GemmEpilogue::kBf16, kNoOverrides);
    EXPECT_EQ(bf16.core, plan::GemmCore::kOneBatch) << bf16.to_string();
    EXPECT_EQ(bf16.block_m, 128) << bf16.to_string();
    EXPECT_EQ(bf16.block_n, rows == 100.0 ? 128 : 192) << bf16.to_string();  // 100: fewer waves at 128 (32 experts)
    EXPECT_EQ(bf16.cluster_size, rows == 100.0 ? 1 : 2) << bf16.to_string();
  }
  for (const double rows : {1536.0, 192.0}) {
    const plan::GemmPlan l1 =
        plan::plan_grouped_gemm(rows, 4096, 7168, 32, 132, plan::GemmEpilogue::kSwigluFp8, kNoOverrides);
    EXPECT_EQ(l1.block_m, 128) << l1.to_string();
    EXPECT_EQ(l1.core, plan::GemmCore::kOneBatch) << l1.to_string();
    EXPECT_EQ(l1.block_n, 256) << l1.to_string();
    EXPECT_EQ(l1.cluster_size, 2) << l1.to_string();
  }
  const int max_k = plan::kGemmCoreMaxKBlocks * 128;
  EXPECT_EQ(plan::plan_grouped_gemm(1536, 4096, max_k, 32, 132, plan::GemmEpilogue::kSwigluFp8, kNoOverrides).core,
            plan::GemmCore::kOneBatch);
  const plan::GemmPlan l1_deep_k =
      plan::plan_grouped_gemm(1536, 4096, max_k + 128, 32, 132, plan::GemmEpilogue::kSwigluFp8, kNoOverrides);
  EXPECT_EQ(l1_deep_k.core, plan::GemmCore::kTwoHalves) << l1_deep_k.to_string();
  EXPECT_EQ(l1_deep_k.block_m, 128) << l1_deep_k.to_string();
  for (const auto epilogue : {plan::GemmEpilogue::kBf16, plan::GemmEpilogue::kSwigluFp8}) {
    const plan::GemmPlan decode = plan::plan_grouped_gemm(16, 4096, 7168, 128, 132, epilogue, kNoOverrides);
    EXPECT_EQ(decode.block_m, 64);
    EXPECT_EQ(decode.block_n, 256);
    EXPECT_EQ(decode.cluster_size, 1);
  }
  // Pins choose among the compiled kernels and name themselves when none matches.
  plan::GemmPins pins;
  pins.block_n = 128;
  EXPECT_EQ(plan::plan_grouped_gemm(16, 4096, 7168, 8, 132, plan::GemmEpilogue::kBf16, kNoOverrides, pins).block_m,
            128);
  expect_error(
      [&] { plan::plan_grouped_gemm(16, 4096, 7168, 8, 132, plan::GemmEpilogue::kSwigluFp8, kNoOverrides, pins); },
      "block_n=128");
  pins = {};
  pins.cluster_size = 2;  // only the one-batch core is compiled with clusters of 2
  for (const auto epilogue : {plan::GemmEpilogue::kBf16, plan::GemmEpilogue::kSwigluFp8})
    EXPECT_EQ(plan::plan_grouped_gemm(1536, 4096, 7168, 32, 132, epilogue, kNoOverrides, pins).core,
              plan::GemmCore::kOneBatch);
  pins.core = 1;
  expect_error(
      [&] { plan::plan_grouped_gemm(1536, 4096, 7168, 32, 132, plan::GemmEpilogue::kSwigluFp8, kNoOverrides, pins); },
      "cluster_size=2");
  pins.core = 2;  // the one-batch core stages at most kGemmCoreMaxKBlocks K blocks of B scales per tile
  expect_error(
      [&] {
        plan::plan_grouped_gemm(1536, 4096, 128 * (plan::kGemmCoreMaxKBlocks + 1), 32, 132, plan::GemmEpilogue::kBf16,
                                kNoOverrides, pins);
      },
      "k=");
  pins.cluster_size = 3;
  expect_error(
      [&] { plan::plan_grouped_gemm(1536, 4096, 7168, 32, 132, plan::GemmEpilogue::kBf16, kNoOverrides, pins); },
      "cluster_size");
  // The fused layer: T * R * K / E = T * 8 * 8 / 256 = e = T / 4 tokens per expert; BLOCK_M holds e + 2 sqrt(e)
  // (plan::mega_block_m_rows): 16 up to T = 39 (15.99), 32 up to 90 (31.99), 64 up to 199 (63.86), 128 from 200. One
  // rank: Flash 512 tokens = 12 per expert -> 32, 2048 = 48 -> 64, 8192 = 192 -> 128; V3 512 = 16 -> 32, 2048 = 64 ->
  // 128.
  EXPECT_DOUBLE_EQ(plan::mega_block_m_rows(16.0), 24.0);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 32), 132, kNoOverrides).block_m, 16);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 39), 132, kNoOverrides).block_m, 16);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 40), 132, kNoOverrides).block_m, 32);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 90), 132, kNoOverrides).block_m, 32);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 91), 132, kNoOverrides).block_m, 64);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 199), 132, kNoOverrides).block_m, 64);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 200), 132, kNoOverrides).block_m, 128);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 1, 512), 132, kNoOverrides).block_m, 32);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 1, 2048), 132, kNoOverrides).block_m, 128);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("flash", 1, 512), 132, kNoOverrides).block_m, 32);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("flash", 1, 2048), 132, kNoOverrides).block_m, 64);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("flash", 1, 8192), 132, kNoOverrides).block_m, 128);
  for (const plan::MegaKernelShape& k : plan::kMegaKernels)  // the fused kernels are GEMM-core shapes
    EXPECT_EQ(plan::mega_smem_bytes(k.block_m, k.block_n, k.num_stages, 256, 32, k.weights),
              fused_core_smem_bytes(k) + layout::MegaSmemCounts::num_bytes(256, 32));
  for (const auto& name : test::sweep_shape_names())
    for (const int r : test::sweep_ranks(name)) {
      int prev = 0;
      for (const int t : test::sweep_tokens()) {
        const int bm = plan::plan_mega_moe(named_shape(name, r, t), 132, kNoOverrides).block_m;
        ASSERT_GE(bm, prev) << name << " R=" << r << " T=" << t;
        prev = bm;
      }
    }
}

// The swap-AB core (plan::GemmCore::kSwapAB, GemmPins::core 3): the planner's own choice only for FP4 weights at
// decode sizes (2x the expected rows per expert <= 32), so FP8 plans are unchanged; pinned, BLOCK_M from the ladder
// over 16 / 32 / 64 (the smallest holding 2x the expected rows, else 64), the weight rows on WGMMA M (128 or 256 per
// tile with bf16 output, 256 with the SwiGLU epilogue), cluster 1.
TEST(Plan, SwapAbCoreForFp4DecodeOrWhenPinned) {
  for (const double m : {0.0, 0.25, 1.0, 4.0, 8.0, 16.0, 31.0, 32.0, 64.0, 1000.0})
    for (const auto weights : {plan::GemmWeights::kFp8, plan::GemmWeights::kFp4})
      for (const auto epilogue : {plan::GemmEpilogue::kBf16, plan::GemmEpilogue::kSwigluFp8}) {
        const plan::GemmPlan p = plan::plan_grouped_gemm(m, 4096, 7168, 32, 132, epilogue, kNoOverrides, {}, weights);
        const bool swap_ab = weights == plan::GemmWeights::kFp4 && 2 * m <= 32;
        EXPECT_EQ(p.core == plan::GemmCore::kSwapAB, swap_ab) << p.to_string();
        if (swap_ab)
          EXPECT_EQ(p.block_m, 2 * m <= 16 ? 16 : 32) << p.to_string();
        else
          EXPECT_TRUE(p.block_m == 64 || p.block_m == 128) << p.to_string();
      }
  plan::GemmPins pins;
  pins.block_n = 128;  // a tile only the two-halves / one-batch cores have at BLOCK_M 128 is still chosen
  EXPECT_EQ(plan::plan_grouped_gemm(1, 4096, 7168, 8, 132, plan::GemmEpilogue::kBf16, kNoOverrides, pins).block_m, 128);
  const std::pair<double, int> ladder[] = {{0, 16},  {1, 16},    {8, 16},  {8.5, 32},
                                           {16, 32}, {16.5, 64}, {32, 64}, {1000, 64}};
  for (const auto weights : {plan::GemmWeights::kFp8, plan::GemmWeights::kFp4})
    for (const auto epilogue : {plan::GemmEpilogue::kBf16, plan::GemmEpilogue::kSwigluFp8})
      for (const auto& [m, block_m] : ladder) {
        pins = {};
        pins.core = 3;
        const plan::GemmPlan p =
            plan::plan_grouped_gemm(m, 4096, 7168, 128, 132, epilogue, kNoOverrides, pins, weights);
        SCOPED_TRACE(p.to_string());
        check_gemm(p);
        const int block_n = p.block_n;  // bf16: 128 or 256 weight rows by the waves cost; SwiGLU: 256
        if (epilogue == plan::GemmEpilogue::kSwigluFp8) {
          EXPECT_EQ(block_n, 256);
        }
        EXPECT_TRUE(block_n == 128 || block_n == 256);
        EXPECT_EQ(p.core, plan::GemmCore::kSwapAB);
        EXPECT_EQ(p.weights, weights);
        EXPECT_EQ(p.block_m, block_m);
        EXPECT_EQ(p.cluster_size, 1);
        EXPECT_TRUE(p.wg_split_channels);
        EXPECT_EQ(p.wg_tile_m, block_n / 2);  // weight rows: one or two 64-row WGMMA tiles
        EXPECT_EQ(p.wg_tile_n, block_m);      // tokens
        // Partial + final accumulators (block_n / 2 x block_m / 128 each) + FP4 fragments + 40.
        EXPECT_EQ(p.math_registers_needed,
                  block_n / 128 * block_m + (weights == plan::GemmWeights::kFp4 ? 32 : 0) + 40);
        EXPECT_NE(p.to_string().find("core=swap-ab"), std::string::npos);
        EXPECT_NE(p.to_string().find("tokens on WGMMA N"), std::string::npos);
      }
  // Pins and overrides within the swap-AB core.
  pins = {};
  pins.core = 3, pins.block_m = 32;
  EXPECT_EQ(plan::plan_grouped_gemm(1000, 4096, 7168, 8, 132, plan::GemmEpilogue::kBf16, kNoOverrides, pins).block_m,
            32);
  plan::PlanOverrides o;
  o.block_m = 16;
  pins.block_m = 0;
  EXPECT_EQ(plan::plan_grouped_gemm(1000, 4096, 7168, 8, 132, plan::GemmEpilogue::kBf16, o, pins).block_m, 16);
  o.num_stages = 11;  // the FP8 32-row kernel's
  o.block_m = 0;
  EXPECT_EQ(plan::plan_grouped_gemm(1, 4096, 7168, 8, 132, plan::GemmEpilogue::kBf16, o, pins).block_m, 32);
  auto refused = [&](const plan::GemmPins& bad, plan::GemmEpilogue epilogue, const std::string& needle) {
    expect_error([&] { plan::plan_grouped_gemm(8, 4096, 7168, 8, 132, epilogue, kNoOverrides, bad); }, needle);
  };
  pins = {};
  pins.core = 3;
  pins.block_m = 128;
  refused(pins, plan::GemmEpilogue::kBf16, "block_m=128 matches no compiled grouped-GEMM kernel (core=swap-ab)");
  pins.block_m = 0, pins.block_n = 128;
  refused(pins, plan::GemmEpilogue::kSwigluFp8, "block_n=128");
  pins.block_n = 0, pins.cluster_size = 2;
  refused(pins, plan::GemmEpilogue::kBf16, "cluster_size=2");
  pins.cluster_size = 0, pins.tile_buffer = 1;
  refused(pins, plan::GemmEpilogue::kBf16, "tile_buffer=1");
  pins = {};
  pins.core = 4;
  refused(pins, plan::GemmEpilogue::kBf16, "3 (swap-ab)");
  pins = {};
  pins.block_m = 16;  // a swap-AB tile without the core pin
  refused(pins, plan::GemmEpilogue::kBf16, "swap-ab only with core=3");
  // SYMMOE_BLOCK_M at a swap-AB-only height runs that core (the fused layer reads the same override), both epilogues.
  pins = {};
  o = {};
  o.block_m = 16;
  for (const plan::GemmEpilogue e : {plan::GemmEpilogue::kBf16, plan::GemmEpilogue::kSwigluFp8}) {
    const plan::GemmPlan forced = plan::plan_grouped_gemm(8, 4096, 7168, 8, 132, e, o, pins);
    EXPECT_EQ(forced.block_m, 16);
    EXPECT_EQ(forced.core, plan::GemmCore::kSwapAB) << forced.to_string();
  }
  o.block_m = 64;  // compiled on the planner's cores: they keep it
  EXPECT_NE(plan::plan_grouped_gemm(8, 4096, 7168, 8, 132, plan::GemmEpilogue::kBf16, o, pins).core,
            plan::GemmCore::kSwapAB);
  // validate(): the swap-AB warpgroup tile is 64 weight rows x block_m tokens.
  pins = {};
  pins.core = 3;
  plan::GemmPlan g = plan::plan_grouped_gemm(8, 4096, 7168, 8, 132, plan::GemmEpilogue::kBf16, kNoOverrides, pins);
  EXPECT_NO_THROW(g.validate());
  g.wg_tile_n = 2 * g.block_m;
  expect_error([&] { g.validate(); }, "math warpgroup tiles");
}

// MegaMoe::forward plans each call for its own token count: the workspace (layout, pool) must be the T_max plan's
// whatever the call, BLOCK_M must not grow as the batch shrinks, the wave target follows the formula, and a call
// above T_max is refused.
TEST(Plan, MegaPlanPerCallSharesTheWorkspace) {
  test::for_each_deployment([&](const std::string&, const MoeShape& s) {
    SCOPED_TRACE(s.to_string());
    const plan::MegaPlan full = plan::plan_mega_moe(s, 132, kNoOverrides);
    ASSERT_EQ(full.num_tokens, s.num_max_tokens_per_rank);
    int previous_block_m = full.block_m;
    for (int t = s.num_max_tokens_per_rank; t >= 1; t /= 4) {
      const plan::MegaPlan call = plan::plan_mega_moe(s, 132, t, kNoOverrides);
      ASSERT_NO_THROW(call.validate());
      ASSERT_EQ(call.num_tokens, t);
      ASSERT_EQ(call.workspace_bytes, full.workspace_bytes) << call.to_string();
      ASSERT_EQ(call.pool_rows, full.pool_rows) << call.to_string();
      ASSERT_LE(call.block_m, previous_block_m) << call.to_string();
      ASSERT_EQ(call.wave_l1_tiles, call.num_experts_per_wave * call.l1_blocks_per_expert) << call.to_string();
      ASSERT_EQ(call.data_registers, layout::MegaRoles::kDataRegisters);
      ASSERT_EQ(call.math_registers, layout::MegaRoles::kMathRegisters);
      ASSERT_EQ(call.num_dispatch_warps, layout::MegaRoles::kNumDispatchWarps);
      ASSERT_EQ(call.num_threads, layout::MegaRoles::kNumThreads);
      previous_block_m = call.block_m;
    }
    EXPECT_THROW(plan::plan_mega_moe(s, 132, s.num_max_tokens_per_rank + 1, kNoOverrides), Error);
  });
}

TEST(Plan, EpSmsScaleWithTokens) {
  EXPECT_EQ(plan::plan_ep(named_shape("v3", 8, 1), layout::TokenDtype::kFp8E4m3, 132, kNoOverrides).dispatch_sms, 1);
  EXPECT_EQ(plan::plan_ep(named_shape("v3", 8, 8192), layout::TokenDtype::kFp8E4m3, 132, kNoOverrides).dispatch_sms,
            24);
  // Virtual ranks get a share of the GPU: never more SMs than given.
  EXPECT_EQ(plan::plan_ep(named_shape("v3", 8, 8192), layout::TokenDtype::kBf16, 16, kNoOverrides).dispatch_sms, 16);
}

TEST(Plan, RanksThatDoNotDivideExpertsRaise) {
  for (const auto& name : test::sweep_shape_names()) {
    const int experts = named_shape(name, 1, 1).num_experts;
    for (int r = 1; r <= 72; ++r) {
      if (experts % r == 0) continue;
      const MoeShape s = named_shape(name, r, 128);
      expect_error([&] { plan::plan_mega_moe(s, 132, kNoOverrides); }, "multiple of num_ranks");
      expect_error([&] { plan::plan_ep(s, layout::TokenDtype::kBf16, 132, kNoOverrides); }, "multiple of num_ranks");
    }
  }
  expect_error([] { plan::plan_mega_moe(named_shape("v3", 73, 1), 132, kNoOverrides); }, "num_ranks");
}

TEST(Plan, BadArgumentsRaise) {
  const MoeShape v3 = named_shape("v3", 8, 128);
  expect_error([&] { plan::plan_mega_moe(v3, 0, kNoOverrides); }, "num_sms");
  expect_error([&] { plan::plan_ep(v3, layout::TokenDtype::kBf16, 0, kNoOverrides); }, "num_sms");
  expect_error([] { plan::plan_grouped_gemm(8, 4096, 100, 8, 132, plan::GemmEpilogue::kBf16, kNoOverrides); },
               "k a positive");
  expect_error([] { plan::plan_grouped_gemm(8, 4000, 128, 8, 132, plan::GemmEpilogue::kSwigluFp8, kNoOverrides); },
               "multiple of 256");
  expect_error([] { plan::plan_grouped_gemm(-1, 4096, 128, 8, 132, plan::GemmEpilogue::kBf16, kNoOverrides); },
               "m_per_expert_expected");
  expect_error([] { plan::plan_grouped_gemm(8, 4096, 128, 0, 132, plan::GemmEpilogue::kBf16, kNoOverrides); },
               "num_experts");
  MoeShape wide = v3;
  wide.intermediate = 8192 + 128;
  expect_error([&] { plan::plan_mega_moe(wide, 132, kNoOverrides); }, "L2 arrival mask");
  MoeShape too_wide_hidden = v3;  // a pulling lane carries two per-128 scales
  too_wide_hidden.hidden = plan::kMegaMaxHidden + 128;
  expect_error([&] { plan::plan_mega_moe(too_wide_hidden, 132, kNoOverrides); }, "hidden 8320 exceeds");
  MoeShape plan_max = v3;
  plan_max.hidden = plan::kMegaMaxHidden;
  EXPECT_NO_THROW(plan::plan_mega_moe(plan_max, 132, kNoOverrides));
  MoeShape many_topk = v3;  // a combine item holds one row piece per top-k lane in registers
  many_topk.num_topk = plan::kMegaMaxTopk + 1;
  expect_error([&] { plan::plan_mega_moe(many_topk, 132, kNoOverrides); }, "top-k 9 exceeds");
  expect_error([] { plan::plan_mega_moe(named_shape("v3", 8, 0), 132, kNoOverrides); }, "num_max_tokens_per_rank");
}

TEST(Plan, ValidateCatchesBrokenPlans) {
  const plan::MegaPlan good = plan::plan_mega_moe(named_shape("v3", 8, 4096), 132, kNoOverrides);
  plan::MegaPlan p = good;
  p.num_stages = 1, p.smem_bytes = p.smem_fixed + p.smem_per_stage;
  expect_error([&] { p.validate(); }, "stages");
  p = good;
  p.l1_wg_tile_n = good.l1_wg_tile_n == 256 ? 128 : 256;
  expect_error([&] { p.validate(); }, "warpgroup tiles");
  p = good;
  p.math_registers = 248;
  expect_error([&] { p.validate(); }, "registers per SM");
  p = good;
  p.num_experts_per_wave = 3;
  expect_error([&] { p.validate(); }, "experts per wave");
  p = good;
  p.num_stages = 8, p.smem_bytes = p.smem_fixed + 8 * p.smem_per_stage;
  expect_error([&] { p.validate(); }, "shared memory");
  plan::GemmPlan g = plan::plan_grouped_gemm(1000, 4096, 7168, 32, 132, plan::GemmEpilogue::kBf16, kNoOverrides);
  g.wg_tile_n = 260;
  expect_error([&] { g.validate(); }, "math warpgroup tiles");
  g = plan::plan_grouped_gemm(1000, 4096, 7168, 32, 132, plan::GemmEpilogue::kBf16, kNoOverrides);
  g.b_scales_smem = false, g.smem_fixed = plan::gemm_fixed_smem_bytes(g.block_n, g.tile_buffer, g.weights, false);
  g.smem_bytes = g.smem_fixed + g.num_stages * g.smem_per_stage;
  expect_error([&] { g.validate(); }, "b_scales_smem");
}

// Where the B scales are read (plan::gemm_b_scales_in_smem, the one place): staged in shared memory by the standalone
// FP8 grouped GEMM only, whose plans count the chunk (64 K blocks x block_n / 128 float2); FP4 and fused: global.
TEST(Plan, BScalesInSharedMemory) {
  EXPECT_TRUE(plan::gemm_b_scales_in_smem(plan::GemmWeights::kFp8, false));
  EXPECT_FALSE(plan::gemm_b_scales_in_smem(plan::GemmWeights::kFp4, false));
  EXPECT_FALSE(plan::gemm_b_scales_in_smem(plan::GemmWeights::kFp8, true));
  EXPECT_FALSE(plan::gemm_b_scales_in_smem(plan::GemmWeights::kFp4, true));
  EXPECT_EQ(plan::gemm_sfb_smem_bytes(256, true), plan::kGemmSfbChunkKBlocks * 2 * 8);
  EXPECT_EQ(plan::gemm_sfb_smem_bytes(128, true), plan::kGemmSfbChunkKBlocks * 8);
  EXPECT_EQ(plan::gemm_sfb_smem_bytes(256, false), 0);
  for (const plan::GemmKernelShape& k : plan::kGemmKernels) {
    const bool staged = plan::gemm_b_scales_in_smem(k.weights, false);
    EXPECT_EQ(plan::gemm_smem_bytes(k.block_m, k.block_n, k.num_stages, k.tile_buffer, k.weights, staged),
              plan::gemm_smem_bytes(k.block_m, k.block_n, k.num_stages, k.tile_buffer, k.weights) +
                  (staged ? plan::gemm_sfb_smem_bytes(k.block_n, true) : 0));
  }
  const plan::GemmPlan fp8 =
      plan::plan_grouped_gemm(1536, 4096, 7168, 32, 132, plan::GemmEpilogue::kBf16, kNoOverrides);
  EXPECT_TRUE(fp8.b_scales_smem) << fp8.to_string();
  EXPECT_NE(fp8.to_string().find("b_scales_smem"), std::string::npos) << fp8.to_string();
  const plan::GemmPlan fp4 = plan::plan_grouped_gemm(1536, 4096, 7168, 32, 132, plan::GemmEpilogue::kBf16, kNoOverrides,
                                                     {}, plan::GemmWeights::kFp4);
  EXPECT_FALSE(fp4.b_scales_smem) << fp4.to_string();
  // The fused kernel's shared memory has no B-scale chunk (the two-halves and swap-AB cores read the B scales from
  // global memory; the one-batch core stages its own per tile).
  for (const plan::MegaKernelShape& k : plan::kMegaKernels)
    EXPECT_EQ(plan::mega_smem_bytes(k.block_m, k.block_n, k.num_stages, 256, 32, k.weights),
              fused_core_smem_bytes(k) + layout::MegaSmemCounts::num_bytes(256, 32));
}

// The fused kernel at BLOCK_M 128 (FP8) runs the one-batch core (plan::mega_core): 64 x 256 warpgroup tiles, its
// shared memory the one-batch layout with the staging rows as output region (4 stages: 220736 B before the counts),
// its B-scale barrier counted; the largest H and I the planner accepts fit its staged B scales; an expert count
// whose counts no longer fit next to it is refused, not planned over the limit.
TEST(Plan, MegaBlockM128RunsTheOneBatchCore) {
  const plan::MegaPlan p = plan::plan_mega_moe(named_shape("v3", 8, 4096), 132, kNoOverrides);
  ASSERT_EQ(p.block_m, 128) << p.to_string();
  EXPECT_EQ(p.core, plan::GemmCore::kOneBatch);
  EXPECT_EQ(p.l1_wg_tile_m, 64);
  EXPECT_EQ(p.l1_wg_tile_n, 256);
  EXPECT_EQ(p.num_stages, 4);
  EXPECT_EQ(plan::mega_core_fixed_smem_bytes(128, 256) + 4 * plan::gemm_stage_smem_bytes(128, 256), 220736);
  EXPECT_EQ(p.smem_fixed, plan::gemm_core_fixed_smem_bytes(128, 256, plan::GemmCoreOutput::kStagingRows) +
                              layout::MegaSmemCounts::num_bytes(256, 32));
  EXPECT_EQ(p.smem_bytes, plan::mega_smem_bytes(128, 256, 4, 256, 32));
  EXPECT_EQ(p.named_barriers, layout::MegaRoles::kNumNamedBarriers);
  EXPECT_NE(p.to_string().find("one-batch: tokens on WGMMA M"), std::string::npos) << p.to_string();
  plan::PlanOverrides o;
  o.block_m = 128;
  MoeShape widest = named_shape("v3", 8, 1);  // K = H at L1, I at L2: both at most kGemmCoreFusedMaxKBlocks blocks
  widest.hidden = plan::kMegaMaxHidden, widest.intermediate = layout::kMegaMaxIntermediate;
  EXPECT_EQ(plan::plan_mega_moe(widest, 132, o).core, plan::GemmCore::kOneBatch);
  // One rank: E experts' counts take (3 E + 1 + E / 32) x 4 bytes; 960 fit next to the 220736, 1024 do not.
  MoeShape many = named_shape("v3", 1, 4096);
  many.num_experts = 960;
  const plan::MegaPlan fits = plan::plan_mega_moe(many, 132, o);
  EXPECT_LE(fits.smem_bytes, kMaxSmemPerBlock) << fits.to_string();
  many.num_experts = 1024;
  expect_error([&] { plan::plan_mega_moe(many, 132, o); }, "shared memory");
}

// The fused kernel at BLOCK_M 64 with FP8 weights runs the one-batch core's split-N tile (plan::mega_core): 64 x 128
// warpgroup tiles, its shared memory the one-batch layout with the staging rows and the L1 amax exchange (4 stages:
// 187968 B before the counts; at 5 the counts of 384 experts on one rank would not fit), its B-scale barrier counted.
// FP4 at 64 stays on the two-halves core.
TEST(Plan, MegaBlockM64RunsTheOneBatchCore) {
  const plan::MegaPlan p = plan::plan_mega_moe(named_shape("v3", 8, 128), 132, kNoOverrides);
  ASSERT_EQ(p.block_m, 64) << p.to_string();
  EXPECT_EQ(p.core, plan::GemmCore::kOneBatch);
  EXPECT_EQ(plan::mega_core(64, plan::GemmWeights::kFp8), plan::GemmCore::kOneBatch);
  EXPECT_EQ(plan::mega_core(64, plan::GemmWeights::kFp4), plan::GemmCore::kTwoHalves);
  EXPECT_EQ(p.l1_wg_tile_m, 64);
  EXPECT_EQ(p.l1_wg_tile_n, 128);
  EXPECT_EQ(p.l2_wg_tile_n, 128);
  EXPECT_EQ(p.num_stages, 4);
  EXPECT_EQ(plan::mega_core_fixed_smem_bytes(64, 256),
            plan::kGemmStagingBytes + 2 * 2 * 64 * 4 + 2 * 2 * 2 * plan::kGemmCoreFusedMaxKBlocks * 4 + 1024);
  EXPECT_EQ(plan::mega_core_fixed_smem_bytes(64, 256) + 4 * plan::gemm_stage_smem_bytes(64, 256), 187968);
  EXPECT_EQ(p.smem_fixed, plan::gemm_core_fixed_smem_bytes(64, 256, plan::GemmCoreOutput::kStagingRows) +
                              layout::MegaSmemCounts::num_bytes(256, 32));
  EXPECT_EQ(p.smem_bytes, plan::mega_smem_bytes(64, 256, 4, 256, 32));
  EXPECT_EQ(p.named_barriers, layout::MegaRoles::kNumNamedBarriers);
  EXPECT_NE(p.to_string().find("one-batch: tokens on WGMMA M"), std::string::npos) << p.to_string();
  // 384 experts on one rank: their counts fit next to 4 stages, not next to 5.
  plan::PlanOverrides o;
  o.block_m = 64;
  MoeShape many = named_shape("v3", 1, 4096);
  many.num_experts = 384;
  const plan::MegaPlan fits = plan::plan_mega_moe(many, 132, o);
  EXPECT_EQ(fits.core, plan::GemmCore::kOneBatch);
  EXPECT_LE(fits.smem_bytes, kMaxSmemPerBlock) << fits.to_string();
  EXPECT_GT(fits.smem_bytes + plan::gemm_stage_smem_bytes(64, 256), kMaxSmemPerBlock) << fits.to_string();
  const plan::MegaPlan fp4 = plan::plan_mega_moe(named_shape("v3", 8, 128), 132, o, plan::GemmWeights::kFp4);
  EXPECT_EQ(fp4.core, plan::GemmCore::kTwoHalves) << fp4.to_string();
  EXPECT_EQ(fp4.l1_wg_tile_n, 128);
}

// The fused layer with FP4 weights: the swap-AB kernels at BLOCK_M 16 and 32 (FP4 converted in registers) and the
// two-halves 64 x 256 kernel with 5 raw stages (the math warpgroups convert into an E4M3 ring), the FP8 ladder's
// BLOCK_M up to 64; the shared memory (packed FP4 stages + codes, + the E4M3 ring at 64) in the plan and printed.
// SYMMOE_BLOCK_M=128 is refused for FP4 naming the variable, the weights and the allowed values.
TEST(Plan, MegaFp4) {
  const plan::MegaBlockMs fp4_candidates = plan::mega_block_m_candidates(plan::GemmWeights::kFp4);
  ASSERT_EQ(fp4_candidates.count, 3);
  EXPECT_EQ(fp4_candidates.values[0], 16);
  EXPECT_EQ(fp4_candidates.values[1], 32);
  EXPECT_EQ(fp4_candidates.values[2], 64);
  const plan::MegaBlockMs fp8_candidates = plan::mega_block_m_candidates(plan::GemmWeights::kFp8);
  ASSERT_EQ(fp8_candidates.count, 4);
  EXPECT_EQ(fp8_candidates.values[2], 64);
  EXPECT_EQ(fp8_candidates.values[3], 128);
  for (const plan::MegaKernelShape& k : plan::kMegaKernels)  // exactly the candidates of each format are compiled
    EXPECT_TRUE(plan::mega_block_m_candidates(k.weights).contains(k.block_m)) << k.block_m;
  EXPECT_EQ(plan::kNumMegaKernels, fp8_candidates.count + fp4_candidates.count);
  for (const int tokens : {1, 8, 32, 39, 40, 90, 91, 128, 199, 200, 512, 2048, 8192}) {
    const MoeShape v3 = named_shape("v3", 8, tokens);
    const plan::MegaPlan fp8 = plan::plan_mega_moe(v3, 132, kNoOverrides);
    const plan::MegaPlan fp4 = plan::plan_mega_moe(v3, 132, kNoOverrides, plan::GemmWeights::kFp4);
    const int ladder = tokens <= 39 ? 16 : tokens <= 90 ? 32 : tokens <= 199 ? 64 : 128;  // e + 2 sqrt(e), e = T / 4
    EXPECT_EQ(fp4.weights, plan::GemmWeights::kFp4);
    EXPECT_EQ(fp4.block_m, std::min(ladder, 64)) << tokens << " tokens";
    EXPECT_EQ(fp8.block_m, ladder) << tokens << " tokens";
    EXPECT_EQ(fp4.core, plan::mega_core(fp4.block_m, plan::GemmWeights::kFp4));
    EXPECT_EQ(fp4.l1_wg_tile_n, fp4.block_m == 64 ? 128 : fp4.block_m);  // 64: split N (each converts its rows)
    EXPECT_EQ(fp4.num_stages, plan::kMegaKernels[plan::mega_kernel_index(fp4.block_m, fp4.weights)].num_stages);
    EXPECT_EQ(fp4.smem_bytes, plan::mega_smem_bytes(fp4.block_m, 256, fp4.num_stages, v3.num_experts,
                                                    v3.num_local_experts(), plan::GemmWeights::kFp4));
    EXPECT_EQ(fp4.smem_per_stage, plan::gemm_stage_smem_bytes(fp4.block_m, 256, plan::GemmWeights::kFp4));
    EXPECT_EQ(fp4.workspace_bytes, fp8.workspace_bytes);  // one workspace for both formats
    EXPECT_NE(fp4.to_string().find("weights=fp4"), std::string::npos) << fp4.to_string();
    EXPECT_NE(fp4.to_string().find("(+ FP4 conversion)"), std::string::npos) << fp4.to_string();
    EXPECT_EQ(fp8.to_string().find("FP4"), std::string::npos) << fp8.to_string();
    // Highest id + 1: 4 (L1 done) on the swap-AB core; + one barrier per math warpgroup (ids 5, 6) at BLOCK_M 64 and
    // 128: FP4 (two-halves) its weight conversion, FP8 (one-batch) its copy of the tile's B scales.
    EXPECT_EQ(fp4.named_barriers, fp4.core == plan::GemmCore::kSwapAB ? 5 : 7) << tokens << " tokens";
    EXPECT_EQ(fp8.named_barriers, fp8.block_m >= 64 ? 7 : 5) << tokens << " tokens";
    EXPECT_NE(fp8.to_string().find("weights=fp8"), std::string::npos) << fp8.to_string();
  }
  for (const auto& name : test::sweep_shape_names())
    for (const int r : test::sweep_ranks(name))
      for (const int t : test::sweep_tokens())
        ASSERT_LE(plan::plan_mega_moe(named_shape(name, r, t), 132, kNoOverrides, plan::GemmWeights::kFp4).block_m, 64)
            << name << " R=" << r << " T=" << t;
  plan::PlanOverrides o;
  o.block_m = 128;
  for (const int tokens : {1, 8192})
    expect_error([&] { plan::plan_mega_moe(named_shape("v3", 8, tokens), 132, o, plan::GemmWeights::kFp4); },
                 "SYMMOE_BLOCK_M must be one of 16, 32, 64 for MegaMoE with fp4 weights (the compiled fused kernels), "
                 "got 128");
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 1), 132, o).block_m, 128);  // FP8: 128 stays legal
  o.block_m = 96;
  expect_error([&] { plan::plan_mega_moe(named_shape("v3", 8, 1), 132, o); },
               "SYMMOE_BLOCK_M must be one of 16, 32, 64, 128 for MegaMoE with fp8 weights");
  o.block_m = 64;
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 8192), 132, o, plan::GemmWeights::kFp4).block_m, 64);
  o.block_m = 16;
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 8192), 132, o, plan::GemmWeights::kFp4).core,
            plan::GemmCore::kSwapAB);
  o = {};
  o.num_stages = 4;  // FP8 BLOCK_M 128's count, no FP4 kernel's
  expect_error([&] { plan::plan_mega_moe(named_shape("v3", 8, 1), 132, o, plan::GemmWeights::kFp4); },
               "SYMMOE_NUM_STAGES");
  o.num_stages = 11;
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 1), 132, o, plan::GemmWeights::kFp4).num_stages, 11);
}

TEST(Plan, OverridesApplyAndAreChecked) {
  const MoeShape v3 = named_shape("v3", 8, 4096);
  plan::PlanOverrides o;
  o.block_m = 64;
  const plan::MegaPlan m = plan::plan_mega_moe(v3, 132, o);
  EXPECT_EQ(m.block_m, 64);
  // 32-row grouped-GEMM tiles are compiled for the swap-AB core only: SYMMOE_BLOCK_M=32 runs it there, as the fused
  // kernel's 32-row tile runs its swap-AB core.
  o.block_m = 32;
  for (const plan::GemmEpilogue e : {plan::GemmEpilogue::kBf16, plan::GemmEpilogue::kSwigluFp8})
    EXPECT_EQ(plan::plan_grouped_gemm(1000, 4096, 7168, 32, 132, e, o).core, plan::GemmCore::kSwapAB);
  EXPECT_EQ(plan::plan_mega_moe(v3, 132, o).block_m, 32);
  o.block_m = 48;
  expect_error([&] { plan::plan_mega_moe(v3, 132, o); }, "SYMMOE_BLOCK_M");
  o.block_m = 128;  // legal for the grouped GEMM (bf16 and SwiGLU) and for MegaMoE
  EXPECT_EQ(plan::plan_mega_moe(v3, 132, o).block_m, 128);
  EXPECT_EQ(plan::plan_grouped_gemm(1000, 4096, 7168, 32, 132, plan::GemmEpilogue::kSwigluFp8, o).block_m, 128);
  EXPECT_EQ(plan::plan_grouped_gemm(1, 4096, 7168, 32, 132, plan::GemmEpilogue::kBf16, o).block_m, 128);
  o = {};
  o.experts_per_wave = 3;
  expect_error([&] { plan::plan_mega_moe(v3, 132, o); }, "SYMMOE_EXPERTS_PER_WAVE");
  o.experts_per_wave = 8;
  EXPECT_EQ(plan::plan_mega_moe(v3, 132, o).num_waves, 4);
  o = {};
  o.num_stages = 20;
  expect_error([&] { plan::plan_mega_moe(v3, 132, o); }, "shared memory");
  o.num_stages = 2;  // fits, but the fused kernels are compiled with 5 (BLOCK_M 64) and 4 (BLOCK_M 128) stages
  expect_error([&] { plan::plan_mega_moe(v3, 132, o); }, "SYMMOE_NUM_STAGES");
  o.num_stages = 4;
  EXPECT_EQ(plan::plan_mega_moe(v3, 132, o).num_stages, 4);
  o.num_stages = 1 << 30;
  expect_error([&] { plan::plan_mega_moe(v3, 132, o); }, "SYMMOE_NUM_STAGES");
  expect_error([&] { plan::plan_grouped_gemm(8, 4096, 7168, 32, 132, plan::GemmEpilogue::kBf16, o); },
               "SYMMOE_NUM_STAGES");
  o = {};
  o.ep_sms = 200;
  expect_error([&] { plan::plan_ep(v3, layout::TokenDtype::kBf16, 132, o); }, "SYMMOE_EP_SMS");
  o.ep_sms = 40;
  EXPECT_EQ(plan::plan_ep(v3, layout::TokenDtype::kBf16, 132, o).dispatch_sms, 40);
}

// Row indices in the kernels are 32-bit: a T_max whose row counts overflow int is refused before any sizing, instead
// of wrapping into a 1-SM plan of petabytes (`symmoe plan --tokens 2147483647`).
TEST(Plan, RefusesRowCountsBeyondInt32) {
  const MoeShape huge = named_shape("v3", 8, 2147483647);
  expect_error([&] { plan::plan_ep(huge, layout::TokenDtype::kFp8E4m3, 132, kNoOverrides); },
               "EP: received (R * T_max) rows 17179869176 exceed 2147483647");
  expect_error([&] { plan::plan_mega_moe(huge, 132, kNoOverrides); }, "MegaMoE: received (R * T_max) rows");
  // R * T_max fits, R * T_max * K does not: 8 * 2^25 * 8 = 2^31.
  const MoeShape expanded = named_shape("v3", 8, 1 << 25);
  expect_error([&] { plan::plan_ep(expanded, layout::TokenDtype::kBf16, 132, kNoOverrides); }, "expanded");
  expect_error([&] { plan::plan_mega_moe(expanded, 132, kNoOverrides); }, "expanded");
  // The largest batch the CLI admits (2^20 tokens per rank) plans at 64 ranks.
  const MoeShape big = named_shape("v3", 64, 1 << 20);
  const plan::EpPlan ep = plan::plan_ep(big, layout::TokenDtype::kFp8E4m3, 132, kNoOverrides);
  EXPECT_GE(ep.dispatch_sms, 1);
  EXPECT_GT(ep.buffer_bytes, uint64_t(64) << 20 << 10);  // > 64 GiB: sizes are 64-bit
  EXPECT_NO_THROW(plan::plan_mega_moe(big, 132, kNoOverrides));
}

TEST(Plan, OverridesComeFromEnvironment) {
  ::setenv("SYMMOE_BLOCK_M", "64", 1);
  ::setenv("SYMMOE_EP_SMS", "12", 1);
  const plan::PlanOverrides o = plan::PlanOverrides::from_env();
  EXPECT_EQ(o.block_m, 64);
  EXPECT_EQ(o.ep_sms, 12);
  EXPECT_EQ(o.num_stages, 0);
  EXPECT_NE(o.to_string().find("SYMMOE_BLOCK_M=64"), std::string::npos);
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 8192), 132, plan::PlanOverrides::from_env()).block_m,
            64);  // the planner alone picks 128
  // The planner is pure: the environment reaches it only through the overrides its caller read.
  EXPECT_EQ(plan::plan_mega_moe(named_shape("v3", 8, 8192), 132, kNoOverrides).block_m, 128);
  EXPECT_EQ(plan::plan_ep(named_shape("v3", 8, 8192), layout::TokenDtype::kFp8E4m3, 132, o).dispatch_sms, 12);
  ::setenv("SYMMOE_BLOCK_M", "abc", 1);
  expect_error([] { plan::PlanOverrides::from_env(); }, "SYMMOE_BLOCK_M");
  ::setenv("SYMMOE_BLOCK_M", "-16", 1);
  expect_error([] { plan::PlanOverrides::from_env(); }, "SYMMOE_BLOCK_M must be an integer in [0, 256], got '-16'");
  ::setenv("SYMMOE_BLOCK_M", "4294967312", 1);  // 2^32 + 16: once read as 16 through an int cast
  expect_error([] { plan::PlanOverrides::from_env(); }, "got '4294967312'");
  ::setenv("SYMMOE_BLOCK_M", "99999999999999999999", 1);  // beyond long long
  expect_error([] { plan::PlanOverrides::from_env(); }, "SYMMOE_BLOCK_M must be an integer");
  ::setenv("SYMMOE_BLOCK_M", "64 ", 1);
  expect_error([] { plan::PlanOverrides::from_env(); }, "SYMMOE_BLOCK_M must be an integer");
  ::unsetenv("SYMMOE_BLOCK_M");
  ::unsetenv("SYMMOE_EP_SMS");
  EXPECT_FALSE(plan::PlanOverrides::from_env().any());
}

TEST(Plan, PrintsItself) {
  const plan::MegaPlan m = plan::plan_mega_moe(named_shape("flash", 4, 512), 132, kNoOverrides);
  const std::string s = m.to_string();
  for (const char* key : {"BLOCK_M=", "L1 BLOCK_N=256", "experts/wave=", "stages=", "smem=", "regs data 56 math 224",
                          "named barriers 7", "pool_rows=", "workspace="})
    EXPECT_NE(s.find(key), std::string::npos) << key << " missing in " << s;
  const std::string regions = plan::format_regions("mega", layout::MegaLayout(m.dims()).regions());
  for (const char* key : {"l1_pool_x", "l2_arrival_mask", "combine", "sync", "total"})
    EXPECT_NE(regions.find(key), std::string::npos) << key << " missing in " << regions;
  EXPECT_EQ(plan::format_bytes(1536), "1.50 KiB");
}

TEST(Plan, RegisterEstimate) {
  EXPECT_EQ(plan::math_registers_estimate(64, 128), 64 + 64 + 40);  // the GEMM core's warpgroup tile
  EXPECT_EQ(plan::math_registers_estimate(128, 16), 16 + 16 + 40);
}

}  // namespace
}  // namespace symmoe
