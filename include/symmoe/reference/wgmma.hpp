// Bit-accurate model of one Hopper FP8 tensor-core step: WGMMA m64nNk32 with e4m3 inputs and fp32 accumulators
// (PTX `wgmma.mma_async ... .f32.e4m3.e4m3`), for one output element. Plain C++, no CUDA.
//
//   d = wgmma_e4m3_k32(c, a[0..32), b[0..32))      c: the accumulator before the instruction (0.f when scale-d = 0)
//
// What the hardware does, as reverse-engineered by MMA-Sim (Xie et al., Microsoft Research, arXiv 2511.10909, which
// reports bitwise agreement with Hopper hardware; for FP8 WGMMA: 13 fractional bits and an "e8m13" output). The
// algorithm restated in our words:
//   1. Every term is written as significand x 2^exponent: each product a_i * b_i as (sig_a * sig_b) x 2^(e_a + e_b)
//      with the e4m3 significands in [1, 2) (subnormals: < 1 at exponent -6), so a product's significand lies in
//      [1, 4); c as its fp32 significand in [1, 2) x 2^e_c.
//   2. emax = the largest of these exponents (the products' nominal e_a + e_b, not their normalised exponents).
//   3. Every term is truncated toward zero to a multiple of 2^(emax - 13) (13 fractional bits at emax) and the 33
//      truncated terms are added exactly (one fused addition, no intermediate rounding: the order of the 32 products
//      inside one instruction does not matter).
//   4. The sum is normalised and truncated toward zero to 13 fractional bits (an "e8m13" value in an fp32 register;
//      fp32 subnormals keep multiples of 2^-139).
// Consequences the golden model relies on: one k32 step is a function of the multiset of its 32 products and c;
// a 128-wide K block is four chained steps (c = the previous step's d), as the kernels issue them (math.cuh:
// four m64n128k32 in ascending k, the first with scale-d = 0). NaN inputs (e4m3 0x7f/0xff) or a non-finite c
// give the plain fp32 sum (NaN/inf propagate); the exact special-value behaviour is not modelled.
// NOTES: checked on the GPU by tests/gpu/test_gemm.cu (GroupedGemmFaithful.*: bf16 D and the L1 epilogue's FP8
// codes bitwise equal to the golden model on random normal data, where a plain fp32 partial sum is not).
#pragma once

#include <cstdint>

namespace symmoe::ref {

inline constexpr int kWgmmaK = 32;               // products per FP8 WGMMA instruction
inline constexpr int kWgmmaFractionalBits = 13;  // Hopper FP8 accumulation: alignment and output precision

// One e4m3 code as signed integer significand x 2^(exponent - 3): value = sig * 2^(exp - 3). Zero has sig 0.
struct E4m3Parts {
  int8_t sig = 0;  // -15..15 (normals 8..15 in magnitude, subnormals 1..7)
  int8_t exp = 0;  // -6..8
  bool nan = false;
};
E4m3Parts e4m3_parts(uint8_t code);

// One FP8 WGMMA k32 step for one output element over pre-decoded operands (a[i], b[i], i < kWgmmaK).
float wgmma_e4m3_k32(float c, const E4m3Parts* a, const E4m3Parts* b);
// The same on e4m3 codes.
float wgmma_e4m3_k32(float c, const uint8_t* a, const uint8_t* b);

// A bound on |d - (c + sum a_i b_i)| (exact sum) for the step that returned d: 33 terms each truncated by less than
// one unit 2^(emax - 13), and the output truncated by less than 2^-13 |d|. Used to bound how far two steps over
// nearly equal inputs can drift apart (reference/tolerance.hpp).
double wgmma_e4m3_k32_error_bound(float c, const E4m3Parts* a, const E4m3Parts* b, float d);

}  // namespace symmoe::ref
