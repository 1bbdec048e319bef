// The kernels' FP4 -> E4M3 upconversion (kernels/gemm/fp4_upconvert.hpp, run here on the host with the same code)
// through the word layout of the transformed weights (kernels/gemm/fp4_word_layout.hpp) against the host fold
// (fold_fp4_element): every element value at every shift in every position of a word, the other elements random.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "kernels/gemm/fp4_upconvert.hpp"
#include "kernels/gemm/fp4_word_layout.hpp"
#include "symmoe/fp4_fold.hpp"
#include "symmoe/formats.hpp"

namespace {

using namespace symmoe;
using namespace symmoe::gemm::kernel;

uint8_t converted(const Fp4E4m3x8& v, int i) { return uint8_t((i < 4 ? v.lo : v.hi) >> (8 * (i % 4))); }

TEST(Fp4WordLayout, EveryBitUsedOnceAndPackUnpackRoundTrips) {
  uint32_t signs = 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(fp4_sign_bit(i) % 4, 3) << "element " << i << ": sign must sit in bit 3 of a nibble";
    signs |= 1u << fp4_sign_bit(i);
  }
  EXPECT_EQ(signs, ~kFp4MagnitudeBits);  // the 8 sign bits are exactly the bits the selectors mask out
  EXPECT_EQ(signs & kFp4SignBits, kFp4SignBits);
  std::mt19937 rng(5);
  for (int n = 0; n < 100000; ++n) {
    const uint32_t standard = n < 32 ? (1u << n) : uint32_t(rng());
    const uint32_t packed = fp4_pack_word(standard);
    for (int i = 0; i < 8; ++i)
      ASSERT_EQ(fp4_word_element(packed, i), (standard >> (4 * i)) & 0xF) << std::hex << standard << " element " << i;
  }
}

TEST(Fp4Upconvert, EveryElementAtEveryShiftInEveryPositionMatchesTheHostFold) {
  std::mt19937 rng(7);
  for (int shift = fmt::kFoldExactMinShift; shift <= fmt::kFoldExactMaxShift; ++shift) {
    const Fp4ShiftTable t = fp4_shift_table(shift);
    ASSERT_EQ(fp4_table_index(shift), shift - fmt::kFoldExactMinShift);
    // A base scale with code 127 (1.0f): the element's scale code is 127 + shift.
    for (uint32_t value = 0; value < 16; ++value)
      for (int pos = 0; pos < 8; ++pos)
        for (int rep = 0; rep < 8; ++rep) {  // the other elements: zero, all ones, random
          const uint32_t others = rep == 0 ? 0u : rep == 1 ? 0xFFFFFFFFu : uint32_t(rng());
          const uint32_t standard = (others & ~(0xFu << (4 * pos))) | (value << (4 * pos));
          const Fp4E4m3x8 got = fp4x8_to_e4m3x8(fp4_pack_word(standard), t);
          for (int i = 0; i < 8; ++i) {
            const uint8_t e2m1 = uint8_t((standard >> (4 * i)) & 0xF);
            ASSERT_EQ(converted(got, i), fold_fp4_element(e2m1, 127 + shift, 1.0f))
                << "E2M1 " << int(e2m1) << " shift " << shift << " element " << i << " word " << std::hex << standard;
          }
        }
  }
  // Out-of-range shifts read the nearest table (memory-safe; such weights are refused before any launch).
  EXPECT_EQ(fp4_table_index(-100), 0);
  EXPECT_EQ(fp4_table_index(100), kFp4NumShifts - 1);
}

}  // namespace
