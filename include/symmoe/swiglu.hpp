// The SwiGLU of the MoE L1 epilogue, one element, in fp32: the one formula shared by the GPU epilogue
// (src/kernels/gemm/epilogue_swiglu.cuh) and the golden model (ref::swiglu_faithful, ref::l1_epilogue).
//   g' = clamp > 0 ? min(g, clamp) : g;   u' = clamp > 0 ? clamp(u, -clamp, clamp) : u
//   h  = (silu(g') * u') * weight,   silu(g) = g / (1 + expf(-g))   (IEEE division, full expf, in this order)
// NOTES: expf, not __expf: the device expf and glibc's expf agree to within an ulp, so the GPU output stays
// within one FP8 ulp of the golden model (the cost was not measurable next to the GEMM).
// NOTES: cost is data dependent: gates below ~-87 overflow expf, and the IEEE division by inf/huge values takes
// its slow path in the whole warp. bench gemm l1_swiglu_wide (gate std ~50) ran 1.11x slower than l1_swiglu
// (std ~3, trained-model-like) in the same run (H200; docs/notes/formats.md).
#pragma once

#include <cmath>

#include "symmoe/common.hpp"

namespace symmoe {

SYMMOE_HD float swiglu_weighted(float gate, float up, float weight, float clamp) {
  if (clamp > 0.f) {
    gate = fminf(gate, clamp);
    up = fminf(fmaxf(up, -clamp), clamp);
  }
  const float silu = gate / (1.f + expf(-gate));
  return (silu * up) * weight;
}

}  // namespace symmoe
