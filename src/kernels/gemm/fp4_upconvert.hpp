// FP4 -> E4M3 upconversion of transformed weights, eight elements (one word) at a time (host and device: the CPU test
// tests/cpu/test_fp4_upconvert.cpp checks every element value x shift x position against fold_fp4_element, the host
// fold).
//
// Element (r, c) of a transformed FP4 weight becomes fmt::e2m1_times_pow2_to_e4m3(e2m1, shift) with
// shift = code(r, c / 32) - base_code(r, c / 128) in [fmt::kFoldExactMinShift, fmt::kFoldExactMaxShift]
// (fp4_fold.hpp; exact there by construction, out-of-range blocks are refused by the host transform).
// For a fixed shift the 8 E2M1 magnitudes map to 8 E4M3 magnitude codes: a table of two words (Fp4ShiftTable,
// built with the same fmt function as the host fold). One byte permute (PRMT) with 4 magnitudes as selector
// converts 4 elements; the word layout (fp4_word_layout.hpp) puts their signs where one AND-OR adds them.
#pragma once

#include <cstdint>

#include "kernels/gemm/fp4_word_layout.hpp"
#include "symmoe/formats.hpp"

namespace symmoe::gemm::kernel {

constexpr int kFp4NumShifts = fmt::kFoldExactMaxShift - fmt::kFoldExactMinShift + 1;  // 15 tables

struct Fp4ShiftTable {
  uint32_t lo, hi;  // byte m of (lo, hi): E4M3 magnitude code of E2M1 magnitude m (0..7) times 2^shift
};

SYMMOE_HD Fp4ShiftTable fp4_shift_table(int shift) {
  uint32_t w[2] = {0, 0};
  for (int m = 0; m < 8; ++m) {
    uint8_t code = 0;
    fmt::e2m1_times_pow2_to_e4m3(uint8_t(m), shift, &code);
    w[m / 4] |= uint32_t(code) << (8 * (m % 4));
  }
  return {w[0], w[1]};
}

// PRMT (default mode): byte i of the result is byte (s >> 4i) & 7 of the 8-byte value (y:x); selector bit 3 of a
// nibble would replicate that byte's sign bit instead (the callers keep it clear); bits 16-31 of s are ignored.
// NOTES: the raw instruction, not __byte_perm: that one clears the selector's bit 3s itself (an AND per call the
// compiler cannot share), while fp4x8_to_e4m3x8 clears them once per word for both permutes.
SYMMOE_HD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s));
  return r;
#else
  const uint64_t v = (uint64_t(y) << 32) | x;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t sel = (s >> (4 * i)) & 0xF;
    uint32_t b = uint32_t(v >> (8 * (sel & 7))) & 0xFF;
    if (sel & 8) b = (b & 0x80) ? 0xFF : 0;
    r |= b << (8 * i);
  }
  return r;
#endif
}

// The E4M3 codes of the 8 elements of one transformed word (fp4_word_layout.hpp): element i in byte i of lo (i < 4),
// element 4 + i in byte i of hi.
struct Fp4E4m3x8 {
  uint32_t lo, hi;
};

SYMMOE_HD Fp4E4m3x8 fp4x8_to_e4m3x8(uint32_t packed, const Fp4ShiftTable& t) {
  const uint32_t magnitudes = packed & kFp4MagnitudeBits;  // selector nibbles, bit 3 clear
  return {byte_perm(t.lo, t.hi, magnitudes) | (packed & kFp4SignBits),
          byte_perm(t.lo, t.hi, magnitudes >> 16) | ((packed << kFp4HighSignShift) & kFp4SignBits)};
}

// Index of shift's table, clamped into the table range: a shift outside it only comes from weights the host
// transform refuses, and the clamp keeps the table read in bounds.
SYMMOE_HD int fp4_table_index(int shift) {
  const int i = shift - fmt::kFoldExactMinShift;
  return i < 0 ? 0 : (i >= kFp4NumShifts ? kFp4NumShifts - 1 : i);
}

}  // namespace symmoe::gemm::kernel
