// Layout of transformed FP4 weights: which 8 E2M1 elements one 32-bit word holds (the column order of a row), and
// their bits. The one definition used by the host transform (weight_transform_fp4.cpp), its expansion, the kernels'
// loads and conversion (fp4_upconvert.hpp, swap_ab_math.cuh, math_fp4.cuh, fp4_converter.cuh) and the CPU tests
// (tests/cpu/test_fp4_upconvert.cpp, test_weight_transform_fp4.cpp).
//
// Column order: a row's 128-column K block is 16 words (64 B). Fragment (t, s), t, s in 0..3, is what thread t of a
// quad feeds to the k32 WGMMA step s of the K block as its A registers (rows g and g + 8 of a warp's 16 rows: one
// fragment each):
//   element i < 4 at column 32 s + 4 t + i, element 4 + i at column 32 s + 16 + 4 t + i   (fp4_fragment_column)
// and sits in slot 4 (t ^ ((r / 2) % 4)) + s of row r (fp4_slot). So a thread reads its four steps with one 16-byte
// load per row, and the converters that write E4M3 rows in column order (four lanes per row, one 32-column group
// s each, reading the four words t = 0..3 of their group) read 32 different banks per warp: rows r and r + 2 lie
// 128 B apart and differ in (r / 2) % 4.
//
// Rows in pairs: the 64 bytes of row r in K block kb sit at ((r / 2) * (k / 128) + kb) * 128 + (r % 2) * 64 of the
// expert's data (fp4_row_block_offset): K block by K block, the even row's 64 B then the odd row's. A TMA box of
// 128-byte rows (one K block of a row pair, kFp4PairBytes) x block_n / 2 pairs lands in shared memory as row r of the
// tile at r * 64 (tiles start at even rows), and every box row is one 128-byte line like an FP8 weight row: boxes of
// 64-byte rows (one row, one K block) streamed at FP8's rows per second, i.e. at half its bytes per second
// (docs/notes/gemm.md). fp4_tma_coords gives the box coordinates of a tile.
//
// Bits: element i's 3 magnitude bits stay in bits 4i..4i+2 of nibble i; only the sign bits move (the input word,
// DeepGEMM's layout read as a little-endian word, has element i in nibble i, sign in bit 4i+3):
//   sign of element i < 4 at bit 8i + 7   (bit 3 of nibble 2i + 1)
//   sign of element 4 + i at bit 8i + 3   (bit 3 of nibble 2i)
// Every bit is used once (24 magnitude bits + 8 sign bits). Then, with m = word & kFp4MagnitudeBits:
//   elements 0..3: magnitudes from the selector nibbles of m,       signs = word        & kFp4SignBits
//   elements 4..7: magnitudes from the selector nibbles of m >> 16, signs = (word << 4) & kFp4SignBits
// so the byte i of each result word already holds element i's sign at bit 7 (the E4M3 sign bit): 7 integer ops per
// 8 elements (fp4_upconvert.hpp), the fewest found for a byte permute per 4 elements. The two result words are the
// fragment's two A registers of one row (columns 32 s + 4 t + 0..3 and 32 s + 16 + 4 t + 0..3).
#pragma once

#include <cstdint>

#include "symmoe/common.hpp"

namespace symmoe::gemm::kernel {

constexpr uint32_t kFp4MagnitudeBits = 0x77777777u;  // bits 0-2 of every nibble: the 8 magnitudes
constexpr uint32_t kFp4SignBits = 0x80808080u;       // bit 7 of every byte: where the E4M3 sign goes
constexpr int kFp4HighSignShift = 4;                 // elements 4..7: sign bit 8i + 3 -> 8i + 7

// Slot (word index within the row's K block) of fragment (t, s) in row r, and the column (within the K block) of its
// element i.
SYMMOE_HD constexpr int fp4_slot(int r, int t, int s) { return 4 * (t ^ ((r / 2) % 4)) + s; }
SYMMOE_HD constexpr int fp4_fragment_column(int t, int s, int i) { return 32 * s + (i < 4 ? 0 : 16) + 4 * t + i % 4; }

// Where column c (0..127) of row r's K block lives: slot * 8 + element.
SYMMOE_HD constexpr int fp4_column_position(int r, int c) {
  const int s = c / 32, t = (c % 16) / 4, i = (c % 32) / 16 * 4 + c % 4;
  return fp4_slot(r, t, s) * 8 + i;
}

// Byte offset of row r's 64 bytes in K block kb (k: the row length in elements), within the expert's data.
constexpr int kFp4PairBytes = 128;  // one K block of a row pair: the TMA box's row
SYMMOE_HD constexpr size_t fp4_row_block_offset(int r, int kb, int k) {
  return (size_t(r / 2) * (k / 128) + kb) * kFp4PairBytes + (r % 2) * 64;
}

// The tensor map of FP4 weights is [weight rows / 2 pairs, k bytes per pair]; the box of K block kb of the tile whose
// first weight row (counted over all experts, even) is row: x = kb * kFp4PairBytes, y = row / 2.
struct Fp4TmaCoords {
  int x, y;
};
SYMMOE_HD constexpr Fp4TmaCoords fp4_tma_coords(int kb, int row) { return {kb * kFp4PairBytes, row / 2}; }

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
