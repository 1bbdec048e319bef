// The kernels' FP4 -> E4M3 upconversion (kernels/gemm/fp4_upconvert.hpp, run here on the host with the same code)
// against the host fold (fold_fp4_element): every nibble at every shift of the exact range, four at a time.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/gemm/fp4_upconvert.hpp"
#include "symmoe/fp4_fold.hpp"
#include "symmoe/formats.hpp"

namespace {

using namespace symmoe;

TEST(Fp4Upconvert, EveryNibbleAtEveryShiftMatchesTheHostFold) {
  for (int shift = fmt::kFoldExactMinShift; shift <= fmt::kFoldExactMaxShift; ++shift) {
    const gemm::kernel::Fp4ShiftTable t = gemm::kernel::fp4_shift_table(shift);
    ASSERT_EQ(gemm::kernel::fp4_table_index(shift), shift - fmt::kFoldExactMinShift);
    // A base scale with code 127 (1.0f): the element's scale code is 127 + shift.
    for (uint32_t quad = 0; quad < 0x10000u; quad += 0x0111u) {  // nibble patterns, all 16 values per position
      const uint32_t got = gemm::kernel::fp4x4_to_e4m3x4(quad | 0xABCD0000u, t);  // high half must be ignored
      for (int i = 0; i < 4; ++i) {
        const uint8_t nibble = uint8_t((quad >> (4 * i)) & 0xF);
        const uint8_t want = fold_fp4_element(nibble, 127 + shift, 1.0f);
        ASSERT_EQ(uint8_t(got >> (8 * i)), want) << "nibble " << int(nibble) << " shift " << shift << " pos " << i;
      }
    }
    for (uint32_t n = 0; n < 16; ++n)  // each nibble in each position, the others zero
      for (int i = 0; i < 4; ++i) {
        const uint32_t got = gemm::kernel::fp4x4_to_e4m3x4(n << (4 * i), t);
        EXPECT_EQ(uint8_t(got >> (8 * i)), fold_fp4_element(uint8_t(n), 127 + shift, 1.0f));
      }
  }
  // Out-of-range shifts read the nearest table (memory-safe; such weights are refused before any launch).
  EXPECT_EQ(gemm::kernel::fp4_table_index(-100), 0);
  EXPECT_EQ(gemm::kernel::fp4_table_index(100), gemm::kernel::kFp4NumShifts - 1);
}

}  // namespace
