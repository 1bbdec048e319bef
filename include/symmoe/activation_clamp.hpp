// DeepGEMM's activation_clamp (the argument of fp8_mega_moe / fp8_fp4_mega_moe, and the CLI's --clamp) as the clamp
// argument of the SwiGLU formula (swiglu_weighted, include/symmoe/swiglu.hpp), which the kernels, the layers'
// options (MegaMoeOptions::clamp, ComposedMoeOptions::clamp) and the golden model take.
//   DeepGEMM: None or +inf: no clamp; c >= 0: gate' = min(gate, c), up' = clamp(up, -c, c); c < 0 or NaN: refused
//   (its host assert). swiglu_weighted: clamp > 0 clamps the same way, clamp 0 is "off".
// So +inf maps to 0 and c > 0 to c (the same formula). c = 0 has no value of its own in swiglu_weighted; it maps to
// the smallest positive subnormal s, which gives what DeepGEMM's 0 gives: every activation is a zero.
// NOTES: why s gives zeros, for every finite gate and any up and weight: up' lies in [-s, s], so it is -s, -0, +0
// or s; gate' <= s, and silu(s) = s / 2 rounds to 0 (a tie, to even), silu(0) = 0, silu(g) for g < 0 lies in
// [-0.279, 0), so |silu(gate') * up'| <= 0.279 s, which rounds to a zero. Under flush-to-zero s reads as 0 and the
// clamp is DeepGEMM's literally. The L1 output rows are then zeros (their FP8 scale stays finite: the amax floor of
// formats.hpp), L2 sums zeros into +0 and the combine gives y = +0 on every routed token.
#pragma once

#include <cmath>
#include <limits>

#include "symmoe/common.hpp"

namespace symmoe {

// What DeepGEMM's activation_clamp means, for error messages (C++, Python and the CLI say the same).
inline constexpr const char* kActivationClampMeaning =
    "DeepGEMM's meaning: None or +inf = no clamp, c >= 0 clamps gate to <= c and up to [-c, c], so 0 makes every "
    "activation 0";

// The swiglu_weighted clamp of DeepGEMM's activation_clamp (+inf for None). Throws symmoe::Error for a negative or
// NaN value.
inline float swiglu_clamp_for_activation_clamp(float activation_clamp) {
  SYMMOE_CHECK(activation_clamp >= 0.f, "activation", "activation_clamp must be None or >= 0 (",
               kActivationClampMeaning, "), got ", activation_clamp);
  if (std::isinf(activation_clamp)) return 0.f;
  if (activation_clamp == 0.f) return std::numeric_limits<float>::denorm_min();
  return activation_clamp;
}

}  // namespace symmoe
