// Golden model of the FP8 GEMMs and the L1 (SwiGLU + FP8 re-quantisation) epilogue. Plain C++, no CUDA.
//
// Contract (shapes row major, names as in docs/design.md §2.3, §3.3):
//   A: Fp8Activations [M, K], e4m3 data, one fp32 (or UE8M0-valued) scale per row per 128 columns (block 128).
//   B: Fp8BlockWeights [N, K] (one expert's weights, "NT": D = A . B^T), e4m3 data, one fp32 scale per 128x128 block.
//   D: [M, N] row major.  K must equal a.num_cols == b.num_cols and be a multiple of 128.
//
// Two flavours of every GEMM:
//   exact     fp64 over the dequantised values: D[m,n] = sum_k (double(a8)*double(sa)) * (double(b8)*double(sb)).
//             No rounding except fp64's; this is "the math" the FP8 paths approximate.
//   faithful  the Hopper kernel's arithmetic, bit for bit (src/kernels/gemm/math.cuh, docs/design.md §3.3):
//               acc = 0.f
//               for each 128-wide K block kb (ascending):
//                 partial = block_partial_faithful(a[m, kb], b[n, kb])   // four chained FP8 WGMMA k32 steps
//                 acc = promote_faithful(acc, sa[m,kb], sb[n/128,kb], partial)  // fmaf(sa * sb, partial, acc)
//             block_partial_faithful models the tensor core's reduced-precision accumulation exactly
//             (reference/wgmma.hpp: each k32 step aligns its 32 products and the running partial to the largest
//             exponent, truncates to 13 fractional bits, adds exactly, truncates the result to 13 fractional
//             bits); the promotion is plain fp32 (the product sa * sb rounded first, then one fmaf), as the kernels
//             run it.
//
// L1 epilogue (kernel-faithful), input acc [M, 2I] fp32 in the ORIGINAL layout (columns 0..I-1 gate, I..2I-1 up;
// the GPU's interleaved gate/up layout is data movement modelled by the GEMM's weight transform, not here):
//   g' = clamp > 0 ? min(g, clamp) : g;   u' = clamp > 0 ? min(max(u, -clamp), clamp) : u
//   silu = g' / (1.f + expf(-g'))                                    (fp32, IEEE division, libm expf)
//   h    = (silu * u') * w[m]                                          (fp32, in this order)
//   (one formula: symmoe::swiglu_weighted in include/symmoe/swiglu.hpp, used by the GPU epilogue too)
//   per row m, per 128 intermediate channels j: amax = max |h|; scale = fmt::scale_for_amax(amax, 448, kUe8m0);
//   q = fmt::quantize_e4m3(h, scale, kUe8m0)  (= e4m3(h * (1/scale)), exact multiply by a power of two).
//   Output: Fp8Activations [M, I], block 128, scales hold the UE8M0 power-of-two values as fp32.
//   NOTES: CUDA's expf and glibc's expf may differ in the last ulps, so a GPU epilogue can differ from this model
//   by one FP8 step on the rare elements that sit within 2^-19 of a rounding boundary (and its block scale when
//   amax / 448 sits that close to a power of two): reference/tolerance.hpp derives and bounds this.
//
// Row-range overloads compute rows [row_begin, row_end) of A against one expert's B: the grouped (contiguous)
// GEMM is a sequence of these, one per expert segment. Output is [row_end - row_begin, N].
//
// All functions throw symmoe::Error (component "ref") naming the argument on a shape mismatch.
#pragma once

#include <cstdint>
#include <vector>

#include "symmoe/quant.hpp"
#include "symmoe/reference/wgmma.hpp"

namespace symmoe::ref {

// D[m, n] = sum_k A[m,k] * B[n,k]; see the contract above.
std::vector<double> gemm_exact(const Fp8Activations& a, const Fp8BlockWeights& b);    // [M, N]
std::vector<float> gemm_faithful(const Fp8Activations& a, const Fp8BlockWeights& b);  // [M, N]

// Rows [row_begin, row_end) of A only (grouped GEMM: one call per expert segment). Output [row_end-row_begin, N].
std::vector<double> gemm_exact(const Fp8Activations& a, int row_begin, int row_end, const Fp8BlockWeights& b);
std::vector<float> gemm_faithful(const Fp8Activations& a, int row_begin, int row_end, const Fp8BlockWeights& b);

// Exact GEMM with an fp64 (unquantised) left operand a [M, K] against dequantised B [N, K]: the second layer of
// the exact MLP, which never quantises the intermediate activation.
std::vector<double> gemm_exact(const std::vector<double>& a, int M, const Fp8BlockWeights& b);  // [M, N]

// The two halves of the faithful GEMM's inner loop, for one output element and one 128-wide K block (a, b: the
// block's 128 decoded e4m3 values of the row and the column): the WGMMA partial sum and the fp32 promotion.
float block_partial_faithful(const E4m3Parts* a, const E4m3Parts* b);
float promote_faithful(float acc, float scale_a, float scale_b, float partial);

// Kernel-faithful L1 epilogue (see above). acc [M, 2I], row_weight [M] (the token's top-k weight for this
// expert), clamp <= 0 disables clamping. I must be a multiple of 128.
Fp8Activations l1_epilogue(const std::vector<float>& acc, int M, int I, const std::vector<float>& row_weight,
                           float clamp);

// Exact SwiGLU in fp64, no quantisation: h[m, i] = silu(g') * u' * w[m] with the same clamp rule. acc [M, 2I]
// original layout, w [M]. Returns [M, I].
std::vector<double> swiglu_exact(const std::vector<double>& acc, int M, int I, const std::vector<double>& w,
                                 double clamp);

// One element of the faithful SwiGLU (shared by l1_epilogue and the tests): symmoe::swiglu_weighted
// (include/symmoe/swiglu.hpp), the formula the GPU epilogue runs.
float swiglu_faithful(float gate, float up, float weight, float clamp);

}  // namespace symmoe::ref
