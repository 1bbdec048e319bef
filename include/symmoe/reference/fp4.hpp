// Golden model of the FP8 x FP4 GEMMs and expert MLP (E2M1 weights, UE8M0 scale per row per 32 columns).
//
//   exact     fp64 over the dequantised values: D[m, n] = sum_k (a8 * sa) * (e2m1(b) * 2^(code - 127)), read straight
//             from the E2M1 codes and scale codes.
//   faithful  the Hopper kernels' arithmetic: fold the weights (fp4_fold.hpp: E4M3 codes + one fp32 base scale per
//             128 x 128 block, exact or refused) and run the faithful FP8 GEMM (reference/gemm.hpp) on the result:
//             the kernels upconvert in shared memory and then run the unchanged FP8 WGMMA + per-128-K promotion.
// Out-of-range scales: refused by the fold (fp4_fold.hpp states the rule), so the faithful model never sees an
// inexact weight; gemm_exact (fp4) does not fold and accepts any non-NaN codes, expert_mlp_exact (fp4) folds.
// The expert MLP: L1 and L2 weights FP4 [2I, H] and [H, I] (original gate/up layout); the faithful MLP is
// expert_mlp_faithful on the folded weights, the exact MLP expert_mlp_exact on them (the fold is exact, so the
// dequantised values are the FP4 ones: tests/cpu/test_reference_fp4.cpp checks it element by element).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "symmoe/fp4_fold.hpp"
#include "symmoe/quant.hpp"
#include "symmoe/reference/mlp.hpp"

namespace symmoe::ref {

struct ExpertWeightsFp4 {
  Fp4Weights w1;  // [2I, H], gate rows then up rows
  Fp4Weights w2;  // [H, I]
};

// Random weights as make_random_expert (same variances, deterministic in (seed, expert)), quantised to FP4 with
// UE8M0 per-32 scales (quantize_weights_fp4).
ExpertWeightsFp4 make_random_expert_fp4(int hidden, int intermediate, int expert, uint64_t seed);

// Both layers folded (fp4_fold.hpp); throws naming "w1" / "w2" when a block is out of the exact range.
ExpertWeights fold_expert_fp4(const ExpertWeightsFp4& w);

// The whole MoE layer with FP4 weights: fold every expert, then moe_forward_faithful / _composed / _exact (mlp.hpp)
// on the folded map; the exact forward on the folded map is the exact FP4 layer (the fold is exact).
using ExpertWeightMapFp4 = std::map<int, ExpertWeightsFp4>;
ExpertWeightMapFp4 make_random_experts_fp4(int hidden, int intermediate, const std::vector<Routing>& routings,
                                           uint64_t seed);
ExpertWeightMap fold_experts_fp4(const ExpertWeightMapFp4& w);

std::vector<double> gemm_exact(const Fp8Activations& a, const Fp4Weights& b);    // [M, N]
std::vector<float> gemm_faithful(const Fp8Activations& a, const Fp4Weights& b);  // [M, N]

std::vector<uint16_t> expert_mlp_faithful(const Fp8Activations& x, int row_begin, int row_end,
                                          const ExpertWeightsFp4& w, const std::vector<float>& row_weight, float clamp);
std::vector<double> expert_mlp_exact(const Fp8Activations& x, int row_begin, int row_end, const ExpertWeightsFp4& w,
                                     const std::vector<double>& row_weight, double clamp);

}  // namespace symmoe::ref
