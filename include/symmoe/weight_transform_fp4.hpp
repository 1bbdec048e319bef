// One-time host transform of FP4 expert weights into the layout the FP4 grouped GEMM and fused kernels read.
//
// Input, per expert, as DeepGEMM's fp8_fp4_mega_moe takes them (recipe (1, 1, 32)), num_experts back to back:
//   L1 data   E2M1 [2I, K/2] bytes (column 2j low nibble, 2j+1 high), rows 0..I-1 gate, I..2I-1 up;
//   L1 scales UE8M0 packed int32 [2I, K/128] (four codes per int32, fp4_fold.hpp), one code per row per 32 columns;
//   L2 data   E2M1 [H, I/2], L2 scales int32 [H, I/128], the same way.
// Output (what the kernels read):
//   L1 data   [2I, K/2] rows interleaved in groups of 8 exactly as the FP8 L1 data (gemm::l1_original_row), each
//             32-bit word (8 elements) with its sign bits moved to where the kernels' conversion wants them (an
//             internal bit layout, src/kernels/gemm/fp4_word_layout.hpp: the magnitudes stay, the signs permute);
//   L1 scales int32 [K/128, 2I] MN-major (a K block's codes of consecutive rows are adjacent: one TMA box of
//             4 x BLOCK_N bytes per K block), rows interleaved the same way: word (kb, r) = input word (orig(r), kb);
//   L1 bases  fp32 [I/128, K/128, 2]: the fold's base scales (fp4_fold.hpp) of gate block (t, kb) and up block
//             (I/128 + t, kb), paired like the FP8 L1 scales (weight_transform.hpp), so the promotion is unchanged;
//   L2 data   [H, I/2] rows in place, words packed as the L1 data; L2 scales int32 [I/128, H] MN-major; L2 bases
//             fp32 [H/128, I/128] (the FP8 L2 scale layout).
// Scale code of element (r, c) in the output: byte (c % 128) / 32 of word (c / 128, r).
// A kernel converts element (r, c) of the transformed L1 to E4M3 as
//   fmt::e2m1_times_pow2_to_e4m3(e2m1(r, c), code(r, c/32) - fmt::fold_base_code(base), &out)
//   e2m1(r, c) = element c % 8 of the row's word c / 8 (fp4_word_layout.hpp)
//   base = L1 bases[r / 256][c / 128][(r % 16) / 8]      (gate rows take the gate base, up rows the up base)
// (L2: base = L2 bases[r / 128][c / 128]) and promotes with that base as the weight scale, exactly as the FP8 path
// promotes with its (gate, up) scale pair. expand_*_fp4 below compute that whole E4M3 tensor on the host: the FP8
// kernels run on it give the bits the FP4 kernels must give.
// Requirements: I % 128 == 0, K % 128 == 0 (H for L2), every scale block within the fold's exact range. Everything
// is checked before anything is written; errors name the argument and the expert.
#pragma once

#include <cstdint>

namespace symmoe::gemm {

// out_data: E*2I*K/2 bytes, out_scales: E*(K/128)*2I int32, out_bases: E*(I/128)*(K/128)*2 floats.
void transform_l1_weights_fp4(const uint8_t* data, const uint32_t* scales, int num_experts, int inter, int k,
                              uint8_t* out_data, uint32_t* out_scales, float* out_bases);

// L2: out_data E*H*I/2 bytes, out_scales E*(I/128)*H int32 from scales [E, H, I/128], out_bases E*(H/128)*(I/128)
// floats.
void transform_l2_weights_fp4(const uint8_t* data, const uint32_t* scales, int num_experts, int hidden, int inter,
                              uint8_t* out_data, uint32_t* out_scales, float* out_bases);

// The E4M3 the kernels compute from the transformed weights (data, MN-major scales, bases; see above):
// L1: out_e4m3 E*2I*K bytes in the interleaved FP8 L1 layout (weight_transform.hpp), its scales being out_bases.
// L2: out_e4m3 E*H*I bytes, the FP8 L2 layout, its scales being the L2 bases.
void expand_l1_fp4(const uint8_t* data, const uint32_t* scales, const float* bases, int num_experts, int inter, int k,
                   uint8_t* out_e4m3);
void expand_l2_fp4(const uint8_t* data, const uint32_t* scales, const float* bases, int num_experts, int hidden,
                   int inter, uint8_t* out_e4m3);

}  // namespace symmoe::gemm
