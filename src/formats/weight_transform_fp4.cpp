// FP4 weight transform (interleave gate/up rows by 8, pack the word layout, scales MN-major, fold base scales) and
// its expansion to E4M3; layout in weight_transform_fp4.hpp.
#include "symmoe/weight_transform_fp4.hpp"

#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gemm/fp4_word_layout.hpp"
#include "symmoe/common.hpp"
#include "symmoe/fp4_fold.hpp"
#include "symmoe/weight_transform.hpp"

namespace symmoe::gemm {
namespace {

// Packed int32 scales read as their UE8M0 bytes (byte j of an int32 is code j on a little-endian host).
static_assert(std::endian::native == std::endian::little, "packed UE8M0 scales are read as bytes");
const uint8_t* codes_of(const uint32_t* scales) { return reinterpret_cast<const uint8_t*>(scales); }

void check_dims(const char* fn, int num_experts, int rows, int cols, const void* a, const void* b, const void* c) {
  SYMMOE_CHECK(num_experts > 0, "gemm", fn, ": num_experts must be > 0, got ", num_experts);
  SYMMOE_CHECK(rows > 0 && rows % 128 == 0, "gemm", fn, ": rows must be a positive multiple of 128, got ", rows);
  SYMMOE_CHECK(cols > 0 && cols % 128 == 0, "gemm", fn, ": K must be a positive multiple of 128, got ", cols);
  SYMMOE_CHECK(a && b && c, "gemm", fn, ": null pointer argument");
}

// Checks every expert's scales (input layout [rows, k/128]) and returns all base scales [E, rows/128, k/128].
std::vector<float> all_bases(const uint32_t* scales, int num_experts, int rows, int k, const std::string& what) {
  const size_t words = size_t(rows) * (k / 128), nb = size_t(rows / 128) * (k / 128);
  std::vector<float> bases(num_experts * nb);
  for (int e = 0; e < num_experts; ++e)
    fp4_fold_bases(codes_of(scales + e * words), rows, k, what + " of expert " + std::to_string(e),
                   bases.data() + e * nb);
  return bases;
}

// One expert's scales [rows, k/128] (row src_row(r) for output row r) -> MN-major [k/128, rows].
template <typename SrcRow>
void scales_mn_major(const uint32_t* in, int rows, int k, SrcRow src_row, uint32_t* out) {
  const size_t kb = k / 128;
  for (size_t b = 0; b < kb; ++b)
    for (int r = 0; r < rows; ++r) out[b * rows + r] = in[size_t(src_row(r)) * kb + b];
}

// Copies `rows` rows of row_bytes E2M1 bytes (row src_row(r) for output row r) into the kernels' layout
// (fp4_word_layout.hpp): rows in pairs K block by K block, the columns of each 128-column K block reordered into
// fragment slots of output row r, every word's bits packed (row_bytes % 64 == 0, rows even).
template <typename SrcRow>
void pack_rows(const uint8_t* in, int rows, size_t row_bytes, SrcRow src_row, uint8_t* out) {
  for (int r = 0; r < rows; ++r) {
    const uint8_t* src = in + size_t(src_row(r)) * row_bytes;
    const int k = int(row_bytes * 2);
    for (size_t kb = 0; kb < row_bytes / 64; ++kb) {
      uint8_t* block = out + kernel::fp4_row_block_offset(r, int(kb), k);
      std::memset(block, 0, 64);
      for (int c = 0; c < 128; c += 4) {  // 4 columns at a time: they share one slot (fp4_column_position)
        const int pos = kernel::fp4_column_position(r, c);
        uint32_t standard = 0;
        uint8_t* word = block + pos / 8 * 4;
        std::memcpy(&standard, word, 4);
        for (int j = 0; j < 4; ++j) {
          const size_t col = kb * 128 + c + j;
          const uint32_t nibble = (src[col / 2] >> (4 * (col % 2))) & 0xFu;
          standard |= nibble << (4 * (pos % 8 + j));
        }
        std::memcpy(word, &standard, 4);
      }
      for (int b = 0; b < 64; b += 4) {  // every element of the block placed (unpacked): now move the sign bits
        uint32_t w;
        std::memcpy(&w, block + b, 4);
        w = kernel::fp4_pack_word(w);
        std::memcpy(block + b, &w, 4);
      }
    }
  }
}

// Element (r, c) of a transformed row of k columns: its E2M1 code (fp4_word_layout.hpp).
uint8_t transformed_element(const uint8_t* data, int r, int k, int c) {
  const int pos = kernel::fp4_column_position(r, c % 128);
  uint32_t word;
  std::memcpy(&word, data + kernel::fp4_row_block_offset(r, c / 128, k) + pos / 8 * 4, 4);
  return kernel::fp4_word_element(word, pos % 8);
}

// Expands one expert from the transformed layout; base_of(r, kb) gives row r's base scale in K block kb.
template <typename BaseOf>
void expand_rows(const uint8_t* data, const uint32_t* scales_mn, int rows, int k, BaseOf base_of, uint8_t* out) {
  const uint8_t* codes = codes_of(scales_mn);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < k; ++c) {
      const uint8_t nibble = transformed_element(data, r, k, c);
      const uint8_t code = codes[(size_t(c / 128) * rows + r) * 4 + (c % 128) / 32];
      out[size_t(r) * k + c] = fold_fp4_element(nibble, code, base_of(r, c / 128));
    }
}

}  // namespace

void transform_l1_weights_fp4(const uint8_t* data, const uint32_t* scales, int num_experts, int inter, int k,
                              uint8_t* out_data, uint32_t* out_scales, float* out_bases) {
  check_dims("transform_l1_weights_fp4", num_experts, 2 * inter, k, data, scales, out_data);
  SYMMOE_CHECK(out_scales && out_bases, "gemm", "transform_l1_weights_fp4: null pointer argument");
  const size_t rows = 2 * size_t(inter), row_bytes = k / 2, kb = k / 128, tiles = inter / 128;
  const std::vector<float> bases = all_bases(scales, num_experts, int(rows), k, "l1 scales");  // checks first
  for (int e = 0; e < num_experts; ++e) {
    pack_rows(
        data + e * rows * row_bytes, int(rows), row_bytes, [&](int r) { return l1_original_row(r, inter); },
        out_data + e * rows * row_bytes);
    scales_mn_major(
        scales + e * rows * kb, int(rows), k, [&](int r) { return l1_original_row(r, inter); },
        out_scales + e * rows * kb);
    const float* s = bases.data() + e * (rows / 128) * kb;
    float* o = out_bases + e * tiles * kb * 2;
    for (size_t t = 0; t < tiles; ++t)
      for (size_t b = 0; b < kb; ++b) {
        o[(t * kb + b) * 2 + 0] = s[t * kb + b];
        o[(t * kb + b) * 2 + 1] = s[(tiles + t) * kb + b];
      }
  }
}

void transform_l2_weights_fp4(const uint8_t* data, const uint32_t* scales, int num_experts, int hidden, int inter,
                              uint8_t* out_data, uint32_t* out_scales, float* out_bases) {
  check_dims("transform_l2_weights_fp4", num_experts, hidden, inter, data, scales, out_data);
  SYMMOE_CHECK(out_scales && out_bases, "gemm", "transform_l2_weights_fp4: null pointer argument");
  const std::vector<float> bases = all_bases(scales, num_experts, hidden, inter, "l2 scales");  // checks first
  const size_t words = size_t(hidden) * (inter / 128), row_bytes = inter / 2;
  for (int e = 0; e < num_experts; ++e) {
    pack_rows(
        data + e * hidden * row_bytes, hidden, row_bytes, [](int r) { return r; }, out_data + e * hidden * row_bytes);
    scales_mn_major(
        scales + e * words, hidden, inter, [](int r) { return r; }, out_scales + e * words);
  }
  std::memcpy(out_bases, bases.data(), bases.size() * sizeof(float));
}

void expand_l1_fp4(const uint8_t* data, const uint32_t* scales, const float* bases, int num_experts, int inter, int k,
                   uint8_t* out_e4m3) {
  check_dims("expand_l1_fp4", num_experts, 2 * inter, k, data, scales, bases);
  SYMMOE_CHECK(out_e4m3, "gemm", "expand_l1_fp4: null pointer argument");
  const size_t rows = 2 * size_t(inter), kb = k / 128;
  for (int e = 0; e < num_experts; ++e) {
    const float* b = bases + e * (rows / 256) * kb * 2;
    const auto base_of = [&](int r, int j) { return b[(size_t(r / 256) * kb + j) * 2 + (r % 16) / 8]; };
    expand_rows(data + e * rows * k / 2, scales + e * rows * kb, int(rows), k, base_of, out_e4m3 + e * rows * k);
  }
}

void expand_l2_fp4(const uint8_t* data, const uint32_t* scales, const float* bases, int num_experts, int hidden,
                   int inter, uint8_t* out_e4m3) {
  check_dims("expand_l2_fp4", num_experts, hidden, inter, data, scales, bases);
  SYMMOE_CHECK(out_e4m3, "gemm", "expand_l2_fp4: null pointer argument");
  const size_t rows = hidden, kb = inter / 128;
  for (int e = 0; e < num_experts; ++e) {
    const float* b = bases + e * (rows / 128) * kb;
    expand_rows(
        data + e * rows * inter / 2, scales + e * rows * kb, int(rows), inter,
        [&](int r, int j) { return b[size_t(r / 128) * kb + j]; }, out_e4m3 + e * rows * inter);
  }
}

}  // namespace symmoe::gemm
