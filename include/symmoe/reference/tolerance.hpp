// How far a correct GPU result of the MoE layer may lie from the kernel-faithful golden model, per output element,
// derived from the numerics rather than chosen. Plain C++, no CUDA.
//
// Given bit-identical inputs, the kernels and the faithful model (reference/gemm.hpp, reference/mlp.hpp) run the
// same operations in the same order: the FP8 WGMMA steps (reference/wgmma.hpp), the fp32 promotion, SwiGLU, the
// UE8M0 scale and e4m3 cast, the L2 bf16 rounding and the combine (ascending lanes, fp32, one bf16 rounding). The one
// operation that is not bit-reproducible is expf in the SwiGLU (CUDA's expf: <= 2 ulp error, Programming Guide's
// math table; glibc's: < 1 ulp). Its effect on the pre-quantisation L1 value h:
//   e = expf(-g):             |e_dev - e_host| <= 3 ulp(e) <= 3 * 2^-23 |e|
//   d = 1 + e (rounded):      relative difference <= 3 * 2^-23 + 2 * 2^-24 = 4 * 2^-23
//   g / d, * u', * w:         three more roundings, each possibly on either side: + 3 * 2^-23
//   => |h_dev - h_host| <= 7 * 2^-23 |h| (plus second-order terms)  <  kSwigluRelDiff |h| = 2^-19 |h|  (2x margin)
// Consequences:
//   - An e4m3 code q = rne(h / s) can differ only where h / s lies within kSwigluRelDiff |h / s| of a rounding
//     midpoint between two e4m3 values (a "fragile code"); it then moves by one e4m3 step.
//   - A block scale s = ceil_pow2(amax / 448) can differ only where amax / 448 lies within kSwigluRelDiff (plus the
//     division's rounding) of a power of two (a "fragile scale"); every code of that block may then be requantised
//     at 2s or s/2 and moves by at most half a step at each scale plus kSwigluRelDiff |h|.
//   - Everything downstream is the same function of the codes on both sides, so a token with no fragile code or
//     scale in any lane must come out BITWISE equal.
//   - Otherwise, per output channel c of a lane whose codes moved by D_i (dequantised) at positions i:
//       L2 fp32:  sum_i D_i |W2[c, i]|                                  the exact change of the product
//               + 3 sum_{K blocks with a moved code} sb * s_max * sum_{4 steps} err_step
//                 (err_step = wgmma_e4m3_k32_error_bound: model and device are each that far from their exact
//                 sums; the device's alignment exponent may be one larger, so 1 + 2 = 3 of the model's bound)
//               + num_k_blocks * 2^-23 * (|l2| + that)                  the later fp32 promotions may round apart
//       L2 bf16:  + one bf16 ulp of (|l2| + the above)                 the two values may round to neighbours
//       y:        sum over the token's lanes of that + K * 2^-23 * sum |rows| (fp32 combine) + one bf16 ulp of y.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "symmoe/reference/mlp.hpp"

namespace symmoe::ref {

inline constexpr double kSwigluRelDiff = 0x1p-19;  // bound on |h_dev - h_host| / |h|, derived above

// Whether rne-to-e4m3 of v (a value already divided by its scale, |v| <= 448) can change when v moves by up to
// rel |v|: true iff a rounding midpoint of e4m3 (or the saturation edge) lies within that distance.
bool e4m3_code_is_fragile(float v, double rel);
// Whether scale_for_amax(amax', 448, kUe8m0) can differ from scale_for_amax(amax, ...) for |amax' - amax| <=
// rel * amax: true iff amax / 448 is within rel (+ 2^-23) of a power of two.
bool ue8m0_scale_is_fragile(float amax, double rel);

// One rank's faithful output with its allowed device deviation.
struct FaithfulWithSlack {
  std::vector<uint16_t> y;    // bf16 [T, H]: bitwise moe_forward_faithful
  std::vector<double> slack;  // [T, H]: |y_device - y| allowed (0 for tokens without fragile codes or scales)
  size_t num_codes = 0, num_fragile_codes = 0, num_fragile_scales = 0;  // over all routed lanes
};

// moe_forward_faithful plus the slack above, per rank (inputs as for moe_forward_faithful).
std::vector<FaithfulWithSlack> moe_forward_faithful_with_slack(const MoeShape& shape, const ExpertWeightMap& weights,
                                                               const std::vector<MoeLayerInput>& inputs, float clamp,
                                                               double rel = kSwigluRelDiff);

}  // namespace symmoe::ref
