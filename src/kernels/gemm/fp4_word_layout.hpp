// Bit layout of one 32-bit word of transformed FP4 weights: 8 E2M1 elements (4 consecutive bytes of a row, columns
// 8j..8j+7), host packing and unpacking. The one definition used by the host transform (weight_transform_fp4.cpp),
// its expansion, the kernels' conversion (fp4_upconvert.hpp) and the CPU test (tests/cpu/test_fp4_upconvert.cpp).
//
// Input (DeepGEMM's layout, read as a little-endian word): element i in nibble i (bits 4i..4i+3, sign in bit 4i+3).
// Transformed word: the 3 magnitude bits of element i stay in bits 4i..4i+2 of nibble i; only the sign bits move:
//   sign of element i < 4 at bit 8i + 7   (bit 3 of nibble 2i + 1)
//   sign of element 4 + i at bit 8i + 3   (bit 3 of nibble 2i)
// Every bit is used once (24 magnitude bits + 8 sign bits). Then, with m = word & kFp4MagnitudeBits:
//   elements 0..3: magnitudes from the selector nibbles of m,       signs = word        & kFp4SignBits
//   elements 4..7: magnitudes from the selector nibbles of m >> 16, signs = (word << 4) & kFp4SignBits
// so the byte i of each result word already holds element i's sign at bit 7 (the E4M3 sign bit): 7 integer ops per
// 8 elements (fp4_upconvert.hpp), the fewest found for a byte permute per 4 elements.
#pragma once

#include <cstdint>

#include "symmoe/common.hpp"

namespace symmoe::gemm::kernel {

constexpr uint32_t kFp4MagnitudeBits = 0x77777777u;  // bits 0-2 of every nibble: the 8 magnitudes
constexpr uint32_t kFp4SignBits = 0x80808080u;       // bit 7 of every byte: where the E4M3 sign goes
constexpr int kFp4HighSignShift = 4;                 // elements 4..7: sign bit 8i + 3 -> 8i + 7

// Bit of element i's sign in a transformed word.
SYMMOE_HD constexpr int fp4_sign_bit(int i) { return i < 4 ? 8 * i + 7 : 8 * (i - 4) + 7 - kFp4HighSignShift; }

// DeepGEMM word (element i in nibble i) -> transformed word.
SYMMOE_HD constexpr uint32_t fp4_pack_word(uint32_t standard) {
  uint32_t w = standard & kFp4MagnitudeBits;
  for (int i = 0; i < 8; ++i) w |= ((standard >> (4 * i + 3)) & 1u) << fp4_sign_bit(i);
  return w;
}

// E2M1 code (sign in bit 3) of element i of a transformed word.
SYMMOE_HD constexpr uint8_t fp4_word_element(uint32_t packed, int i) {
  return uint8_t(((packed >> (4 * i)) & 7u) | (((packed >> fp4_sign_bit(i)) & 1u) << 3));
}

}  // namespace symmoe::gemm::kernel
