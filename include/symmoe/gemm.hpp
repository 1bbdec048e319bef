// Grouped FP8 GEMM on SM90 (Hopper): D[e] = A[e] . B[e]^T with DeepSeek-V3 block scaling, for the MoE expert
// layers. Two layouts of the token rows and two epilogues.
//
// Contract (all pointers are device pointers; row major; K-major operands):
//   A    e4m3 [num_total_rows, k]: the tokens. Row r belongs to the expert whose range contains it:
//          kContiguous: expert e owns rows [segment_starts[e], segment_starts[e] + valid_e) where
//                       valid_e = num_valid_rows ? num_valid_rows[e] : segment_starts[e+1] - segment_starts[e]
//                       (the EP "expand" layout: segments back to back at aligned offsets, padding rows between);
//                       num_total_rows = num_rows.
//          kMasked:     A is [E, max_m, k] (num_rows = max_m); expert e owns rows [e*max_m, e*max_m + valid_e),
//                       valid_e = min(num_valid_rows[e], max_m) (decode). num_total_rows = E * max_m.
//        Counts and starts live in device memory (no host sync; CUDA-graph capturable).
//   sfa  fp32 [k/128, sfa_stride]: A's scale of row r, K block kb at sfa[kb * sfa_stride + r] ("K-block major",
//        so a tile's scales are one contiguous run). sfa_stride >= num_total_rows and a multiple of 4
//        (sfa_stride_for()). UE8M0-valued (power-of-two) fp32 scales are accepted as they are.
//   B    the expert weights, in one of two formats (GroupedGemmInput::weights):
//        kFp8: b e4m3 [E, n, k]; sfb fp32 [E, n/128, k/128] (one scale per 128x128 block).
//        kFp4: as transform_l2_weights_fp4 / transform_l1_weights_fp4 produce them (weight_transform_fp4.hpp):
//              b E2M1 [E, n, k/2], 8 elements per 32-bit word with the sign bits permuted (the transform's
//              internal word layout);
//              b_scale_codes int32 [E, k/128, n] (MN-major; byte j of word (kb, r) is the UE8M0 code of row r,
//              columns [128 kb + 32 j, +32));
//              sfb fp32: the fold's base scales, in exactly the FP8 sfb layout (bf16 epilogue [E, n/128, k/128],
//              L1 epilogue the (gate, up) pairs). The kernel upconverts B to E4M3 in shared memory (exact,
//              fp4_fold.hpp), so the result is the FP8 path's on the expanded weights (expand_*_fp4), bit for bit.
//   bf16 epilogue:  D bf16 [num_total_rows, n]; only the experts' valid rows are written.
//   L1 epilogue (grouped_gemm_swiglu_fp8): B is the L1 weight after transform_l1_weights() (gate/up rows
//        interleaved by 8, n = 2I columns) with its transformed scales; output
//          out        e4m3 [num_total_rows, I]  = Q8(row_weight * SwiGLU(gate, up))
//          out_scales fp32 [I/128, out_scale_stride], UE8M0-valued, one per row per 128 channels (K-block major:
//                     exactly the `sfa` layout of the next GEMM with k = I)
//        with SwiGLU(g, u) = silu(min(g, c)) * clamp(u, -c, c) (clamp c > 0; c <= 0 disables) and the
//        quantisation of ref::l1_epilogue (include/symmoe/reference/gemm.hpp).
//   Rows past valid_e (padding, masked tails) are read and computed but never written.
// Requirements (checked before launch, symmoe::Error names the argument): n % 128 == 0 (L1: n % 256 == 0),
// k % 128 == 0, 16-byte aligned pointers, segment_starts[e] expected multiples of the block (any alignment is
// correct; 64/128 avoids wasted tiles).
// Numerics: per 128-wide K block the WGMMA fp32 partial is promoted as acc = fmaf(sa * sb, partial, acc)
// (ref::gemm_faithful); expect ~1e-3 relative Frobenius error vs the exact product.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace symmoe::gemm {

enum class GroupLayout { kContiguous, kMasked };
enum class WeightFormat { kFp8, kFp4 };

struct GroupedGemmInput {
  GroupLayout layout = GroupLayout::kContiguous;
  int num_experts = 0, n = 0, k = 0;
  int num_rows = 0;                         // kContiguous: rows of A; kMasked: max_m
  const int32_t* segment_starts = nullptr;  // kContiguous: [E + 1]
  const int32_t* num_valid_rows = nullptr;  // kContiguous: optional [E]; kMasked: required [E]
  const uint8_t* a = nullptr;
  const float* sfa = nullptr;
  int sfa_stride = 0;
  WeightFormat weights = WeightFormat::kFp8;
  const uint8_t* b = nullptr;
  const float* sfb = nullptr;
  const uint32_t* b_scale_codes = nullptr;  // kFp4 only (required), 16-byte aligned
  int num_total_rows() const { return layout == GroupLayout::kMasked ? num_experts * num_rows : num_rows; }
};

struct SwigluFp8Output {
  uint8_t* out = nullptr;
  float* out_scales = nullptr;
  int out_scale_stride = 0;
  const float* row_weights = nullptr;  // fp32 [num_total_rows]: the token's top-k weight for this row's expert
  float clamp = 0.f;
};

// Launch choices; 0 = let the planner choose (plan::plan_grouped_gemm over the compiled kernels
// plan::kGemmKernels; block_m / block_n / tile_buffer / cluster_size / core are pins that must name a compiled
// kernel). The SYMMOE_ planner overrides (plan::PlanOverrides) are read once per process, on the first launch.
// core 3, the swap-AB core (tokens on WGMMA N, for few rows per expert), runs only when pinned.
struct LaunchOptions {
  int num_sms = 0;                   // persistent CTAs (default: all SMs of the current device)
  int block_m = 0;                   // 64 or 128; with core 3: 16, 32 or 64
  int block_n = 0;                   // 128 or 256 (128 only with the bf16 epilogue and block_m 128 or core 3)
  int tile_buffer = 0;               // 1: whole-slice epilogue buffer kernel, -1: not (plan::GemmKernelShape)
  int cluster_size = 0;              // 1 or 2 (TMA multicast of the weight tile), 0: the planner's choice
  int core = 0;                      // 1: two-halves, 2: one-batch, 3: swap-AB (plan::GemmCore), 0: planner's choice
  int expected_rows_per_expert = 0;  // hint for the planner (default: contiguous num_rows / E, masked max_m / 2)
};

inline int sfa_stride_for(int num_total_rows) { return (num_total_rows + 3) / 4 * 4; }

// Argument checks (throw symmoe::Error naming the argument); the launchers call them first.
void check_input(const GroupedGemmInput& in, bool swiglu_tile);
void check_output(const GroupedGemmInput& in, const SwigluFp8Output& out);

void grouped_gemm_bf16(const GroupedGemmInput& in, uint16_t* d, cudaStream_t stream, const LaunchOptions& opt = {});
void grouped_gemm_swiglu_fp8(const GroupedGemmInput& in, const SwigluFp8Output& out, cudaStream_t stream,
                             const LaunchOptions& opt = {});

// The configuration a launch would use (for `symmoe plan`, benches and tests).
std::string describe_launch(const GroupedGemmInput& in, bool swiglu, const LaunchOptions& opt = {});

}  // namespace symmoe::gemm
