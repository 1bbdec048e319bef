// Launch planner: pure functions that turn a MoE shape (and the GPU's SM count) into plain config structs —
// block shapes, pipeline stages, warp roles and registers, SM budgets and buffer sizes. Every plan prints itself
// (to_string, shown by `symmoe plan`) and checks itself (validate() throws symmoe::Error naming the field).
//
// Contract: plans depend only on their arguments. The SYMMOE_ overrides come in as a PlanOverrides argument that the
// caller reads once (PlanOverrides::from_env(), through env.hpp) and each plan applies in one place. Kernels are
// instantiated from plans, never from model constants.
// The heuristics are docs/design.md §9 (adapted from DeepGEMM's Blackwell MegaMoE to Hopper); each choice is
// explained where it is made (src/plan/*.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "symmoe/layout/ep.hpp"
#include "symmoe/layout/mega.hpp"
#include "symmoe/shape.hpp"

namespace symmoe::plan {

// Hopper (H100/H200, SM90) limits the plans are checked against.
namespace hopper {
constexpr int kMaxSmemPerBlock = 232448;  // 227 KiB opt-in dynamic shared memory per block
// Registers per SM a kernel's warp roles may claim with setmaxnreg. The SM has 65536; like DeepGEMM's SM90 kernels
// (3 warpgroups: 2 x 128 x 232 + 128 x 40 = 64512) we keep a 1024-register margin.
constexpr int kRegisterBudget = 64512;
constexpr int kMaxRegistersPerThread = 256;  // setmaxnreg range is [24, 256] in steps of 8
constexpr int kMinRegistersPerThread = 24;
constexpr int kDefaultNumSms = 132;  // H100 SXM / H200
constexpr int kWgmmaM = 64;          // rows of one WGMMA per warpgroup
constexpr int kMaxWgmmaN = 256;      // WGMMA N: multiples of 8 up to 256
constexpr int kBlockK = 128;         // one 128-wide K block = one FP8 scale block (promotion granularity)
constexpr int kThreadsPerWarpgroup = 128;
}  // namespace hopper

// Routing is never uniform: every estimate doubles the expected load so hot experts do not set the tail
// (docs/design.md §9.2).
constexpr int kImbalanceFactor = 2;
// The fused layer's BLOCK_M is the smallest tile holding the expected tokens e of an expert plus kMegaBlockMSigmas
// standard deviations of a Poisson count, e + 2 sqrt(e) (mega_block_m_rows): a tile that leaves the experts a little
// above the mean without a second tile, which costs most where e is small. One rank on the H200: 16 at 3-4 expected
// (Flash / V3, 128 tokens: 0.99x the time of 32), 32 at 12 (Flash 512: 0.96x the time of 16, 0.99x that of 64) and 16
// (V3 512: 0.77x that of 16, 0.99x that of 64), 64 at 48 (Flash 2048: 0.88x that of 128), 128 at 64 (V3 2048: 0.81x
// that of 64) (docs/notes/mega.md, "BLOCK_M of the fused layer").
constexpr double kMegaBlockMSigmas = 2.0;
// Rows the fused layer's BLOCK_M must hold at `expected_tokens_per_expert` (see kMegaBlockMSigmas).
double mega_block_m_rows(double expected_tokens_per_expert);

// Expected (token, expert) pairs per expert when every rank has `tokens_per_rank` tokens: T * R * K / E.
double expected_tokens_per_expert(const MoeShape& shape, int tokens_per_rank);

// Environment overrides (0 = not set), read only through env.hpp:
//   SYMMOE_BLOCK_M         force BLOCK_M (tokens per tile) of the MegaMoE and grouped-GEMM plans
//   SYMMOE_NUM_STAGES      force the pipeline depth (must still fit shared memory)
//   SYMMOE_EP_SMS          force the SM count of EP dispatch and combine
//   SYMMOE_EXPERTS_PER_WAVE force the MegaMoE experts per wave (must divide E / R)
struct PlanOverrides {
  int block_m = 0;
  int num_stages = 0;
  int ep_sms = 0;
  int experts_per_wave = 0;
  static PlanOverrides from_env();
  bool any() const { return block_m || num_stages || ep_sms || experts_per_wave; }
  std::string to_string() const;
};

// ---------------------------------------------------------------------------------------------------------------
// Grouped FP8 GEMM (D[e] = A[e] . B[e]^T, A = tokens [m, k], B = weights [n, k]).
// ---------------------------------------------------------------------------------------------------------------
enum class GemmEpilogue : int {
  kBf16 = 0,       // D as bf16
  kSwigluFp8 = 1,  // L1: interleaved gate/up columns -> SwiGLU * top-k weight -> FP8 + scale per 128 channels
};
const char* gemm_epilogue_name(GemmEpilogue e);
// The weight operand B as it sits in global memory: E4M3 [E, n, k] with fp32 128 x 128 block scales, or E2M1 packed
// two per byte [E, n, k/2] with UE8M0 per-32 codes and fp32 128 x 128 base scales (weight_transform_fp4.hpp),
// upconverted to E4M3 in shared memory by the kernel (kernels/gemm/fp4_converter.cuh).
enum class GemmWeights : int { kFp8 = 0, kFp4 = 1 };
constexpr const char* gemm_weights_name(GemmWeights w) { return w == GemmWeights::kFp4 ? "fp4" : "fp8"; }

// How a grouped-GEMM kernel's math warpgroups run the K loop and store the tile (src/plan/gemm_kernels.hpp has the
// compiled kernels of each):
//   kTwoHalves: 64 x 256 warpgroup tiles as two m64n128 passes sharing one partial accumulator, issue turns, epilogue
//               through staging rows and bulk stores (kernels/gemm/math.cuh, epilogue_*.cuh)
//   kOneBatch:  128-row tiles, bf16 output; one m64nN batch per K block per warpgroup, no issue turns, the tile's B
//               scales staged once per tile, stmatrix + TMA-store epilogue (kernels/gemm/core_*.cuh)
//   kSwapAB:    the operands swapped for few tokens per expert: the weights are the WGMMA's M operand (block_n =
//               128 weight rows per tile for bf16 output, 256 for SwiGLU + FP8; FP4 weights converted to E4M3 in
//               registers), the tokens its N operand (block_m = 16 / 32 / 64) (kernels/gemm/swap_ab_*.cuh)
enum class GemmCore : int { kTwoHalves = 0, kOneBatch = 1, kSwapAB = 2 };
constexpr const char* gemm_core_name(GemmCore c) {
  return c == GemmCore::kOneBatch ? "one-batch" : c == GemmCore::kSwapAB ? "swap-ab" : "two-halves";
}

struct GemmPlan {
  // Problem
  double m_per_expert_expected = 0;  // tokens per expert (before kImbalanceFactor)
  int n = 0, k = 0, num_experts = 0;
  GemmEpilogue epilogue = GemmEpilogue::kBf16;
  GemmWeights weights = GemmWeights::kFp8;
  // Tiles: one entry of kGemmKernels. block_m counts tokens, block_n output channels (weight rows).
  int block_m = 0, block_n = 0, block_k = hopper::kBlockK;
  // Accumulator tile of one math warpgroup, in WGMMA terms (M = rows of the A operand, N = columns), and whether
  // the two warpgroups split the block's output channels (64 x 256 tiles; swap-AB: M = block_n / 2 weight rows in
  // 64-row WGMMAs, N = block_m tokens) or its token rows (128-row tiles).
  int wg_tile_m = 0, wg_tile_n = 0;
  bool wg_split_channels = false;
  int num_math_warpgroups = 2;
  GemmCore core = GemmCore::kTwoHalves;
  int cluster_size = 1;      // 2: two CTAs on adjacent token blocks of one expert share the weight tile (TMA multicast)
  bool tile_buffer = false;  // GemmKernelShape::tile_buffer
  bool b_scales_smem = false;  // B scales staged in shared memory (gemm_b_scales_in_smem)
  // Registers (setmaxnreg) and threads: one producer warpgroup (one TMA thread active) + the math warpgroups.
  int producer_registers = 40, math_registers = 232;
  int math_registers_needed = 0;  // estimate (see math_registers_estimate); ptxas -v is the final word
  int num_threads = 0;
  // Shared memory (gemm_smem_bytes)
  int num_stages = 0;
  int smem_per_stage = 0, smem_fixed = 0, smem_bytes = 0;
  // Grid
  int num_sms = 0;  // persistent CTAs (a multiple of cluster_size)
  long long num_tiles_expected = 0;
  int num_waves_expected = 0;
  // The BLOCK_N choice as made: each candidate kernel's expected waves, last-wave use and cost (waves x (block_n +
  // the per-tile overhead in columns)); printed by to_string (`symmoe plan`).
  std::string block_n_candidates;

  std::string to_string() const;
  void validate() const;
};

// Choices pinned by the caller (0 = planner's choice); e.g. symmoe::gemm::LaunchOptions for benches and tests.
// block_m here wins over SYMMOE_BLOCK_M.
struct GemmPins {
  int block_m = 0, block_n = 0, cluster_size = 0;
  int tile_buffer = 0;  // 1: a tile_buffer kernel, -1: not one, 0: planner's choice
  int core = 0;         // 1: GemmCore::kTwoHalves, 2: GemmCore::kOneBatch, 3: GemmCore::kSwapAB, 0: planner's choice
};

// Picks one of kGemmKernels: BLOCK_M from the ladder over the core's compiled block_m values (the smallest holding
// kImbalanceFactor x the expected tokens, else the largest; two-halves / one-batch: 64, 128; swap-AB: 16, 32, 64),
// BLOCK_N by the fewest waves x tile cost, cluster 1 unless pinned (src/plan/gemm_plan.cpp says why). Without a core
// pin the choice is the two-halves or the one-batch core; the swap-AB core only with core 3 pinned. Throws
// symmoe::Error naming the override or pin when no compiled kernel matches it.
GemmPlan plan_grouped_gemm(double m_per_expert_expected, int n, int k, int num_experts, int num_sms,
                           GemmEpilogue epilogue, const PlanOverrides& overrides, const GemmPins& pins = {},
                           GemmWeights weights = GemmWeights::kFp8);

// Registers one math thread needs for a warpgroup accumulator tile of wg_m x wg_n fp32: the final accumulator,
// the partial accumulator of the per-128-K promotion (same size, at most one m64n128 WGMMA: 64 registers) and ~40
// for addresses, scales and epilogue temporaries. An estimate: ptxas -v on the kernel is the final word.
int math_registers_estimate(int wg_tile_m, int wg_tile_n);

// ---------------------------------------------------------------------------------------------------------------
// Fused MoE layer (MegaMoE).
// ---------------------------------------------------------------------------------------------------------------
// BLOCK_M values of the fused kernel per weight format, ascending: the one list the planner picks from (and checks
// SYMMOE_BLOCK_M against), kMegaKernels instantiates (src/plan/mega_kernels.hpp checks it) and the tests read. Each is
// a subset of layout::kMegaBlockMCandidates, which sizes the pool for all of them. FP8: 16, 32, 64, 128. FP4: 16, 32,
// 64 (at 64 the math warpgroups upconvert their own B rows, kernels/gemm/math_fp4.cuh; docs/notes/mega.md: why not
// 128). 16 and 32 run the swap-AB core, 64 the one-batch core (FP4: the two-halves core), 128 the one-batch core
// (mega_core).
struct MegaBlockMs {
  int values[layout::kMegaNumBlockMCandidates] = {};
  int count = 0;
  constexpr bool contains(int block_m) const {
    for (int i = 0; i < count; ++i)
      if (values[i] == block_m) return true;
    return false;
  }
};
constexpr MegaBlockMs mega_block_m_candidates(GemmWeights weights) {
  return weights == GemmWeights::kFp4 ? MegaBlockMs{{16, 32, 64}, 3} : MegaBlockMs{{16, 32, 64, 128}, 4};
}
// The GEMM core of the fused kernel at BLOCK_M block_m with these weights: swap-AB below the WGMMA's 64 rows (the
// tokens on its N); tokens on its M, the one-batch core at 128 and, with FP8 weights, at 64 (the split-N 64 x 256
// tile); FP4 at 64 the two-halves core (its math warpgroups upconvert their own B rows between their issue turns).
constexpr GemmCore mega_core(int block_m, GemmWeights weights) {
  return block_m < 64                                    ? GemmCore::kSwapAB
         : block_m == 64 && weights == GemmWeights::kFp4 ? GemmCore::kTwoHalves
                                                         : GemmCore::kOneBatch;
}
constexpr bool mega_block_ms_are_layout_candidates(GemmWeights weights) {
  const MegaBlockMs c = mega_block_m_candidates(weights);
  int j = 0;  // c.values in order within layout::kMegaBlockMCandidates
  for (int i = 0; i < c.count; ++i) {
    while (j < layout::kMegaNumBlockMCandidates && layout::kMegaBlockMCandidates[j] != c.values[i]) ++j;
    if (j++ == layout::kMegaNumBlockMCandidates) return false;
  }
  return c.count >= 1;
}
static_assert(mega_block_ms_are_layout_candidates(GemmWeights::kFp8) &&
                  mega_block_ms_are_layout_candidates(GemmWeights::kFp4),
              "mega_block_m_candidates: each list must be layout::kMegaBlockMCandidates' values in order");

// Largest hidden size of the fused kernel: a dispatch warp's lane carries two of a pulled row's per-128 scales.
constexpr int kMegaMaxHidden = 2 * 32 * 128;
// Largest top-k of the fused kernel: a combine item holds one row piece per lane in registers.
constexpr int kMegaMaxTopk = 8;

struct MegaPlan {
  MoeShape shape;
  int num_sms = 0;
  int num_tokens = 0;                       // tokens per rank the plan is for (T_max unless planned per call)
  GemmWeights weights = GemmWeights::kFp8;  // the bound weights' format: picks the kernel (shared memory, roles)
  double expected_tokens_per_expert = 0;
  // Tiles: one entry of kMegaKernels (src/plan/mega_kernels.hpp). L1 BLOCK_N 256 (128 intermediate channels of gate/up,
  // so the L1 output scale is per 128); L2 BLOCK_N 256 (a partial last n-block when H % 256 == 128: its upper half is
  // not stored).
  int block_m = 0, l1_block_n = 256, l2_block_n = 256, block_k = hopper::kBlockK;
  GemmCore core = GemmCore::kTwoHalves;  // mega_core(block_m, weights): swap-AB at 16, 32, one-batch at 64 (FP4:
                                         // two-halves) and 128
  int l1_wg_tile_m = 0, l1_wg_tile_n = 0, l2_wg_tile_m = 0, l2_wg_tile_n = 0;
  int l1_blocks_per_expert = 0;                 // expected m-blocks x L1 n-blocks (no imbalance)
  int num_experts_per_wave = 0, num_waves = 0;  // at the expected load (printed; tests)
  // The kernel's wave rule: wave w holds the experts whose ACTUAL L1 tiles (from the received counts, on the device)
  // start in [w, w + 1) x wave_l1_tiles, so cold or untouched experts do not stretch the pipeline: with few tokens
  // every touched expert lands in one wave (all L1 tiles first, then all L2 tiles).
  int wave_l1_tiles = 0;  // = num_experts_per_wave * l1_blocks_per_expert
  // Warp roles per CTA (one persistent CTA per SM) and their registers: copied from layout::MegaRoles (the
  // kernel's own description) so the plan prints and checks them.
  int num_producer_warps = 0, num_dispatch_warps = 0, num_math_warpgroups = 0;
  int num_threads = 0;
  int data_registers = 0, math_registers = 0, math_registers_needed = 0;
  int named_barriers = 0;  // one past the highest named-barrier id the kernel uses (ids below may be unused)
  // Shared memory
  int num_stages = 0, smem_per_stage = 0, smem_fixed = 0, smem_bytes = 0;
  // Workspace
  uint64_t pool_rows = 0;
  uint64_t workspace_bytes = 0;

  layout::MegaDims dims() const;
  std::string to_string() const;
  void validate() const;
};

// weights: the format of the weights the layer runs (the FP4 kernel has its own stage count and shared memory).
MegaPlan plan_mega_moe(const MoeShape& shape, int num_sms, const PlanOverrides& overrides,
                       GemmWeights weights = GemmWeights::kFp8);
// The plan of one call with num_tokens tokens per rank (<= T_max): same workspace and layout as the T_max plan,
// BLOCK_M and experts per wave chosen for that batch (MegaMoe::forward picks it per call, host only).
MegaPlan plan_mega_moe(const MoeShape& shape, int num_sms, int num_tokens, const PlanOverrides& overrides,
                       GemmWeights weights = GemmWeights::kFp8);

// ---------------------------------------------------------------------------------------------------------------
// EP dispatch / combine.
// ---------------------------------------------------------------------------------------------------------------
// What the EP host takes from the plan: how many SMs (CTAs) dispatch and combine use, and the buffer size. The
// kernels' own shape (warps per CTA, shared memory) is fixed by the kernels (src/layout/ep_roles.hpp, copied into
// the plan by plan_ep for printing) and checked by the host against the device before launch.

struct EpPlan {
  MoeShape shape;
  layout::TokenDtype dtype = layout::TokenDtype::kBf16;
  int num_sms = 0;  // SMs of the GPU (or of this virtual rank's share)
  // Notify (counting, prefix sums) runs at the start of the dispatch kernel on the dispatch SMs.
  int dispatch_sms = 0, combine_sms = 0;
  int dispatch_warps_per_cta = 0, combine_warps_per_cta = 0;  // the kernels' (layout::EpDispatchRoles, ...)
  uint64_t buffer_bytes = 0;

  layout::EpDims dims() const;
  std::string to_string() const;
  void validate() const;
};

EpPlan plan_ep(const MoeShape& shape, layout::TokenDtype dtype, int num_sms, const PlanOverrides& overrides);

// ---------------------------------------------------------------------------------------------------------------
// Printing of buffer layouts (for `symmoe plan`): one line per region with offset, size and alignment, and a total.
// ---------------------------------------------------------------------------------------------------------------
std::string format_bytes(uint64_t num_bytes);  // "1.50 GiB (1610612736 B)"
template <int kNumRegions>
std::string format_regions(const std::string& title, const layout::RegionList<kNumRegions>& regions);
extern template std::string format_regions(const std::string&,
                                           const layout::RegionList<layout::EpLayout::kNumRegions>&);
extern template std::string format_regions(const std::string&,
                                           const layout::RegionList<layout::MegaLayout::kNumRegions>&);

}  // namespace symmoe::plan
