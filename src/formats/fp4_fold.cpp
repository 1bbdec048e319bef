// The FP4 -> E4M3 fold with per-128x128 base scales; the rule is in fp4_fold.hpp.
#include "symmoe/fp4_fold.hpp"

#include <algorithm>

#include "symmoe/common.hpp"

namespace symmoe {

int fp4_fold_base_code(int max_code) { return std::max(max_code - fmt::kFoldExactMaxShift, 1); }

void fp4_fold_bases(const uint8_t* scale_codes, int rows, int cols, const std::string& what, float* bases) {
  SYMMOE_CHECK(rows > 0 && rows % 128 == 0, "fp4", what, ": rows must be a positive multiple of 128, got ", rows);
  SYMMOE_CHECK(cols > 0 && cols % 128 == 0, "fp4", what, ": columns must be a positive multiple of 128, got ", cols);
  SYMMOE_CHECK(scale_codes != nullptr, "fp4", what, ": null scale pointer");
  const int sc = cols / 32, bc = cols / 128;
  for (int pass = 0; pass < 2; ++pass) {  // check everything first, then write
    if (pass == 1 && bases == nullptr) break;
    for (int bi = 0; bi < rows / 128; ++bi)
      for (int bj = 0; bj < bc; ++bj) {
        int lo = 255, hi = 0, lo_row = 0, lo_col = 0;
        for (int r = 128 * bi; r < 128 * bi + 128; ++r)
          for (int j = 4 * bj; j < 4 * bj + 4; ++j) {
            const int code = scale_codes[size_t(r) * sc + j];
            SYMMOE_CHECK(code != fmt::kUe8m0NanCode, "fp4", what, ": scale code 0xFF (NaN) at row ", r,
                         ", 32-column block ", j);
            if (code < lo) lo = code, lo_row = r, lo_col = j;
            hi = std::max(hi, code);
          }
        const int base = fp4_fold_base_code(hi);
        SYMMOE_CHECK(lo - base >= fmt::kFoldExactMinShift, "fp4", what, ": scale code ", lo, " at row ", lo_row,
                     ", 32-column block ", lo_col, " is more than ", fmt::kFoldExactMaxShift - fmt::kFoldExactMinShift,
                     " binades below the largest code ", hi, " of its 128x128 block (", bi, ", ", bj, "): E2M1 x 2^(",
                     lo - base, ") is not exact in E4M3 (shift must be >= ", fmt::kFoldExactMinShift, ")");
        if (pass == 1) bases[size_t(bi) * bc + bj] = fmt::ue8m0_to_float(uint8_t(base));
      }
  }
}

uint8_t fold_fp4_element(uint8_t nibble, int code, float base) {
  const int shift = code - fmt::fold_base_code(base);
  uint8_t out = 0;
  const bool exact = fmt::e2m1_times_pow2_to_e4m3(nibble, shift, &out);
  SYMMOE_CHECK(exact, "fp4", "fold_fp4_element: E2M1 code ", int(nibble), " x 2^", shift,
               " is not exact in E4M3 (its block was not checked by fp4_fold_bases)");
  return out;
}

Fp8BlockWeights fold_fp4_weights(const Fp4Weights& w, const std::string& what) {
  const int N = w.num_rows, K = w.num_cols;
  SYMMOE_CHECK(w.data.size() == size_t(N) * K / 2 && w.scales_ue8m0.size() == size_t(N) * (K / 32), "fp4", what,
               ": data must hold [", N, ", ", K / 2, "] bytes and scales [", N, ", ", K / 32, "] codes, got ",
               w.data.size(), " and ", w.scales_ue8m0.size());
  Fp8BlockWeights out;
  out.num_rows = N;
  out.num_cols = K;
  out.scales.resize(size_t(N / 128) * (K / 128));
  fp4_fold_bases(w.scales_ue8m0.data(), N, K, what, out.scales.data());
  out.data.resize(size_t(N) * K);
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < K; ++c) {
      const uint8_t byte = w.data[(size_t(r) * K + c) / 2];
      const uint8_t nibble = (c & 1) ? uint8_t(byte >> 4) : uint8_t(byte & 0xF);
      out.data[size_t(r) * K + c] = fold_fp4_element(nibble, w.scales_ue8m0[size_t(r) * (K / 32) + c / 32],
                                                     out.scales[size_t(r / 128) * (K / 128) + c / 128]);
    }
  return out;
}

}  // namespace symmoe
