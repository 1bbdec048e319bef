// FP4 weights -> the E4M3 codes and per-128x128 base scales that Hopper's FP8 WGMMA path multiplies
// (docs/design.md §3.5).
// The one definition of the fold: the golden model, the host weight transform and the kernels' shared-memory
// upconversion all follow it.
//
// Input: E2M1 codes two per byte (quant.hpp Fp4Weights) with one UE8M0 scale code per row per 32 columns (recipe
// (1, 1, 32), DeepGEMM's weight granularity; a 32 x 32 block scale is the case where its 32 rows repeat one code).
// Base of a 128 x 128 block (rows [128i, 128i + 128), columns [128j, 128j + 128)), as a UE8M0 code:
//   base = max(max_code - fmt::kFoldExactMaxShift, 1)        max_code: the largest scale code in the block
// stored as the fp32 value 2^(base - 127) (a normal fp32, read back by fmt::fold_base_code: its exponent bits).
// Each element (r, c) with scale code s = code(r, c / 32) becomes
//   e4m3 = fmt::e2m1_times_pow2_to_e4m3(nibble, s - base)
// and e4m3 * 2^(base - 127) equals e2m1 * 2^(s - 127) exactly, because s - base <= kFoldExactMaxShift by the base
// rule and s - base >= kFoldExactMinShift is required (below).
// Out-of-range rule (the only one): a block holding a scale code s with s - base < fmt::kFoldExactMinShift (its
// scales span more than 14 binades) or the NaN code 0xFF is REFUSED: fp4_fold_bases / fold_fp4_weights throw
// symmoe::Error naming the argument, the row, the 32-column block and the codes, before writing anything. Nothing is
// saturated or flushed to zero.
// Packed scales: four UE8M0 codes per int32, byte j (little-endian) = the scale of columns [128kb + 32j, +32) of
// K block kb, i.e. int32 [rows, cols / 128] is byte for byte the code array [rows, cols / 32].
#pragma once

#include <cstdint>
#include <string>

#include "symmoe/quant.hpp"

namespace symmoe {

// The base code of a 128 x 128 block whose largest scale code is max_code (see the rule above).
int fp4_fold_base_code(int max_code);

// Checks every 128 x 128 block of scale codes [rows, cols / 32] against the out-of-range rule (throws naming `what`)
// and, when `bases` is not null, writes the base scales fp32 [rows / 128, cols / 128]. rows and cols must be
// positive multiples of 128. Writes nothing when it throws.
void fp4_fold_bases(const uint8_t* scale_codes, int rows, int cols, const std::string& what, float* bases);

// One element: e4m3 of E2M1 `nibble` with scale code `code` in a block whose base scale (fp32) is `base`. The caller
// has checked the block (fp4_fold_bases), so the result is exact.
uint8_t fold_fp4_element(uint8_t nibble, int code, float base);

// Folds whole weights: data e4m3 [N, K], scales = the base scales [N/128, K/128]. Exact (see above) or throws.
Fp8BlockWeights fold_fp4_weights(const Fp4Weights& w, const std::string& what = "weights");

}  // namespace symmoe
