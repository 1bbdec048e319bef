// Golden model of the expert MLP and the whole expert-parallel MoE forward (docs/design.md §2.3).
//
//   y[t] = bf16( sum over lanes k with topk_idx[t,k] >= 0, ascending k, in fp32 of
//                bf16( W2[e] . Q8( w[t,k] * SwiGLU(W1[e] . x[t]) ) ) ),   e = topk_idx[t,k]
// Shapes: x Fp8Activations [T_s, H] (e4m3, per-128 scales); W1 [2I, H] in the ORIGINAL layout (rows 0..I-1 gate,
// I..2I-1 up; the GPU's interleave is a weight transform, i.e. data movement, and is not modelled); W2 [H, I]; both
// Fp8BlockWeights (128x128 scales). A token whose lanes are all -1 gets zeros.
//
// Two modes:
//   exact     fp64 on the dequantised x, W1, W2; no intermediate quantisation or rounding; y stays fp64.
//   faithful  the GPU path: L1 = gemm_faithful, l1_epilogue with the lane's weight (SwiGLU, UE8M0 per-128 FP8
//             re-quantisation), L2 = gemm_faithful, rounded to bf16, then the combine sum (ascending k, fp32, one
//             bf16 rounding). See reference/gemm.hpp for the arithmetic.
// The faithful layer is implemented twice: directly per token (moe_forward_faithful) and as the composed path
// dispatch(expand) -> per-expert MLP on the expanded rows -> combine (moe_forward_composed). They must agree
// bitwise; that is what tests/cpu/test_reference_mlp.cpp and `symmoe run` check.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "symmoe/quant.hpp"
#include "symmoe/reference/combine.hpp"
#include "symmoe/reference/dispatch.hpp"
#include "symmoe/reference/routing.hpp"
#include "symmoe/shape.hpp"

namespace symmoe::ref {

struct ExpertWeights {
  Fp8BlockWeights w1;  // [2I, H], gate rows then up rows
  Fp8BlockWeights w2;  // [H, I]
};
// Weights by global expert id. Only the experts that some token routes to need to exist (a flash/v3 layer has
// 256 experts of 25-44 MB each; the golden model generates only the touched ones).
using ExpertWeightMap = std::map<int, ExpertWeights>;

// Random weights, deterministic in (seed, expert): W1 uniform with variance 1/H, W2 with variance 1/I, quantised
// per 128x128 block (fp32 scales).
ExpertWeights make_random_expert(int hidden, int intermediate, int expert, uint64_t seed);
// The experts that appear in `routings` (one entry per distinct expert id).
ExpertWeightMap make_random_experts(int hidden, int intermediate, const std::vector<Routing>& routings, uint64_t seed);

// One expert on rows [row_begin, row_end) of x. row_weight[i] is row (row_begin + i)'s top-k weight.
// Faithful: bf16 [M, H]. Exact: fp64 [M, H] (weighted, unrounded).
std::vector<uint16_t> expert_mlp_faithful(const Fp8Activations& x, int row_begin, int row_end, const ExpertWeights& w,
                                          const std::vector<float>& row_weight, float clamp);
std::vector<double> expert_mlp_exact(const Fp8Activations& x, int row_begin, int row_end, const ExpertWeights& w,
                                     const std::vector<double>& row_weight, double clamp);

// One rank's layer input.
struct MoeLayerInput {
  Fp8Activations x;  // [T_s, H]
  Routing routing;   // [T_s, K]
};

// Random x ~ N(0, 1) quantised per token per 128 channels (fp32 scales) and a routing from `options`
// (options.seed also seeds x; `rank` salts both).
MoeLayerInput make_random_layer_input(const MoeShape& shape, int num_tokens, const RoutingOptions& options, int rank);

// The rows `tokens` (in that order) of one rank's input: what a check on sampled tokens feeds the golden model.
MoeLayerInput select_tokens(const MoeLayerInput& input, const std::vector<int>& tokens);

// Direct formula per token; outputs[s] is bf16 [T_s, H] (faithful) or fp64 [T_s, H] (exact).
std::vector<std::vector<uint16_t>> moe_forward_faithful(const MoeShape& shape, const ExpertWeightMap& weights,
                                                        const std::vector<MoeLayerInput>& inputs, float clamp);
std::vector<std::vector<double>> moe_forward_exact(const MoeShape& shape, const ExpertWeightMap& weights,
                                                   const std::vector<MoeLayerInput>& inputs, double clamp);

// ---- the composed path, in its three stages (`symmoe run` times them one by one) ----
// Dispatch payload of one rank: x rows (H bytes of e4m3) and scale rows (H/128 fp32 values as bytes).
DispatchInput make_dispatch_input(const MoeLayerInput& input);
// Expert stage on every rank: each local expert's valid expanded rows through expert_mlp_faithful with the row's
// weight (recv_topk_weights); padding rows give zero rows. Returns combine's inputs (bf16 [num_expanded, H]).
std::vector<CombineInput> run_local_experts(const MoeShape& shape, const ExpertWeightMap& weights,
                                            const std::vector<DispatchOutput>& dispatched, float clamp);
// dispatch(expand, expert_alignment) -> run_local_experts -> combine; outputs[s] bf16 [T_s, H].
std::vector<std::vector<uint16_t>> moe_forward_composed(const MoeShape& shape, const ExpertWeightMap& weights,
                                                        const std::vector<MoeLayerInput>& inputs, float clamp,
                                                        int expert_alignment = 1);

}  // namespace symmoe::ref
