// FP4 weight transform: rows interleaved like the FP8 L1 data, packed scales MN-major moved with their rows, base
// scales equal to the fold's (fp4_fold.hpp) paired like the FP8 L1 scales, the expansion of the transformed layout
// equal to the folded experts (interleaved for L1); refusals name the expert and write nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/gemm/fp4_word_layout.hpp"
#include "symmoe/common.hpp"
#include "symmoe/fp4_fold.hpp"
#include "symmoe/weight_transform.hpp"
#include "symmoe/weight_transform_fp4.hpp"

namespace symmoe::gemm {
namespace {

struct Fp4Experts {
  int E, rows, K;
  std::vector<uint8_t> data;     // [E, rows, K/2]
  std::vector<uint32_t> scales;  // [E, rows, K/128], four codes each
  Fp4Weights expert(int e) const {
    Fp4Weights w;
    w.num_rows = rows, w.num_cols = K;
    const size_t nd = size_t(rows) * K / 2, ns = size_t(rows) * (K / 32);
    w.data.assign(data.begin() + e * nd, data.begin() + (e + 1) * nd);
    w.scales_ue8m0.resize(ns);
    std::memcpy(w.scales_ue8m0.data(), reinterpret_cast<const uint8_t*>(scales.data()) + e * ns, ns);
    return w;
  }
};

// Output row r of an expert's transformed data (k columns) holds, element for element, the E2M1 codes of DeepGEMM row
// `in_row` (column 2j in the low nibble), through the layout (fp4_word_layout.hpp): K block kb of row r at
// ((r / 2) * (k / 128) + kb) * 128 + (r % 2) * 64; column 32 s + 4 t + i (i < 4) and 32 s + 16 + 4 t + i as elements
// i and 4 + i of the word in slot 4 (t ^ (r / 2 % 4)) + s of the K block.
void expect_packed_row(const uint8_t* expert, int r, const uint8_t* in_row, int k, const std::string& what) {
  for (int c = 0; c < k; ++c) {
    const int cb = c % 128, s = cb / 32, t = (cb % 16) / 4, i = (cb % 32) / 16 * 4 + cb % 4;
    ASSERT_EQ(kernel::fp4_fragment_column(t, s, i), cb);
    uint32_t word;
    const size_t block = (size_t(r / 2) * (k / 128) + c / 128) * 128 + (r % 2) * 64;
    std::memcpy(&word, expert + block + 4 * (4 * (t ^ (r / 2 % 4)) + s), 4);
    const uint8_t want = (c & 1) ? uint8_t(in_row[c / 2] >> 4) : uint8_t(in_row[c / 2] & 0xF);
    ASSERT_EQ(kernel::fp4_word_element(word, i), want) << what << ", row " << r << ", column " << c;
  }
}

Fp4Experts random_experts(int E, int rows, int K, std::mt19937_64& rng) {
  Fp4Experts x{E, rows, K, std::vector<uint8_t>(size_t(E) * rows * K / 2),
               std::vector<uint32_t>(size_t(E) * rows * (K / 128))};
  for (auto& b : x.data) b = uint8_t(rng());
  // Codes span 14 binades per block, with blocks at different heights (the second half of the rows lower, odd K
  // blocks higher), so the gate and up bases of a tile differ.
  for (size_t i = 0; i < x.scales.size(); ++i) {
    const size_t row = (i / (K / 128)) % rows, kb = i % (K / 128);
    const uint32_t lo = 110 - (row >= size_t(rows) / 2 ? 7 : 0) + 3 * (kb % 2);
    uint32_t v = 0;
    for (int j = 0; j < 4; ++j) v |= uint32_t(lo + rng() % 15) << (8 * j);
    x.scales[i] = v;
  }
  return x;
}

TEST(WeightTransformFp4, L1InterleavesRowsPairsTheFoldBasesAndExpandsToTheFold) {
  std::mt19937_64 rng(11);
  const int E = 2, I = 256, K = 256, rows = 2 * I;
  const Fp4Experts in = random_experts(E, rows, K, rng);
  std::vector<uint8_t> data(in.data.size());
  std::vector<uint32_t> scales(in.scales.size());
  std::vector<float> bases(size_t(E) * (I / 128) * (K / 128) * 2);
  transform_l1_weights_fp4(in.data.data(), in.scales.data(), E, I, K, data.data(), scales.data(), bases.data());
  std::vector<uint8_t> e4m3(size_t(E) * rows * K);
  expand_l1_fp4(data.data(), scales.data(), bases.data(), E, I, K, e4m3.data());
  for (int e = 0; e < E; ++e) {
    const Fp8BlockWeights folded = fold_fp4_weights(in.expert(e));
    for (int r = 0; r < rows; ++r) {
      const int src = l1_original_row(r, I);
      // What the kernels compute in shared memory: the folded expert, rows interleaved like the FP8 L1 data.
      ASSERT_EQ(0, std::memcmp(&e4m3[(size_t(e) * rows + r) * K], &folded.data[size_t(src) * K], K)) << e << ", " << r;
      expect_packed_row(&data[size_t(e) * rows * K / 2], r, &in.data[(size_t(e) * rows + src) * K / 2], K,
                        "l1 expert " + std::to_string(e) + " row " + std::to_string(r));
      for (int w = 0; w < K / 128; ++w)
        ASSERT_EQ(scales[(size_t(e) * (K / 128) + w) * rows + r], in.scales[(size_t(e) * rows + src) * (K / 128) + w]);
    }
    for (int t = 0; t < I / 128; ++t)
      for (int kb = 0; kb < K / 128; ++kb) {
        const float* pair = &bases[((size_t(e) * (I / 128) + t) * (K / 128) + kb) * 2];
        EXPECT_EQ(pair[0], folded.scales[size_t(t) * (K / 128) + kb]);
        EXPECT_EQ(pair[1], folded.scales[size_t(I / 128 + t) * (K / 128) + kb]);
      }
  }
}

TEST(WeightTransformFp4, L2PacksWordsScalesMnMajorBasesAndExpansionAreTheFold) {
  std::mt19937_64 rng(12);
  const int E = 3, H = 256, I = 384;
  const Fp4Experts in = random_experts(E, H, I, rng);
  std::vector<uint8_t> data(in.data.size());
  std::vector<uint32_t> scales(in.scales.size());
  std::vector<float> bases(size_t(E) * (H / 128) * (I / 128));
  transform_l2_weights_fp4(in.data.data(), in.scales.data(), E, H, I, data.data(), scales.data(), bases.data());
  for (int e = 0; e < E; ++e) {
    for (int r = 0; r < H; ++r)
      expect_packed_row(&data[size_t(e) * H * I / 2], r, &in.data[(size_t(e) * H + r) * I / 2], I,
                        "l2 expert " + std::to_string(e) + " row " + std::to_string(r));
    for (int r = 0; r < H; ++r)
      for (int w = 0; w < I / 128; ++w)
        ASSERT_EQ(scales[(size_t(e) * (I / 128) + w) * H + r], in.scales[(size_t(e) * H + r) * (I / 128) + w]);
    const Fp8BlockWeights folded = fold_fp4_weights(in.expert(e));
    for (size_t i = 0; i < folded.scales.size(); ++i) EXPECT_EQ(bases[e * folded.scales.size() + i], folded.scales[i]);
  }
  std::vector<uint8_t> e4m3(size_t(E) * H * I);
  expand_l2_fp4(data.data(), scales.data(), bases.data(), E, H, I, e4m3.data());
  for (int e = 0; e < E; ++e) {
    const Fp8BlockWeights folded = fold_fp4_weights(in.expert(e));
    EXPECT_EQ(0, std::memcmp(&e4m3[size_t(e) * H * I], folded.data.data(), size_t(H) * I)) << "expert " << e;
  }
}

TEST(WeightTransformFp4, RefusesBeforeWriting) {
  std::mt19937_64 rng(13);
  const int E = 2, I = 128, K = 256, rows = 2 * I;
  Fp4Experts in = random_experts(E, rows, K, rng);
  // Expert 1, row 3, K block 1: code 124 -> 140 makes the block span more than 14 binades.
  uint32_t& word = in.scales[(size_t(1) * rows + 3) * (K / 128) + 1];
  word = (word & ~0xFFu) | 140u;
  std::vector<uint8_t> data(in.data.size(), 0xAB);
  std::vector<uint32_t> scales(in.scales.size(), 0xABABABABu);
  std::vector<float> bases(size_t(E) * (I / 128) * (K / 128) * 2, -1.f);
  std::string msg;
  try {
    transform_l1_weights_fp4(in.data.data(), in.scales.data(), E, I, K, data.data(), scales.data(), bases.data());
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("l1 scales of expert 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("largest code 140"), std::string::npos) << msg;
  EXPECT_EQ(data, std::vector<uint8_t>(data.size(), 0xAB));
  EXPECT_EQ(scales, std::vector<uint32_t>(scales.size(), 0xABABABABu));
  EXPECT_EQ(bases, std::vector<float>(bases.size(), -1.f));
  std::vector<float> l2(size_t(E) * 2 * 2, -1.f);
  EXPECT_THROW(
      transform_l2_weights_fp4(in.data.data(), in.scales.data(), E, rows, K, data.data(), scales.data(), l2.data()),
      Error);
  EXPECT_EQ(data, std::vector<uint8_t>(data.size(), 0xAB));
  EXPECT_EQ(scales, std::vector<uint32_t>(scales.size(), 0xABABABABu));
  EXPECT_EQ(l2, std::vector<float>(l2.size(), -1.f));
  EXPECT_THROW(
      transform_l1_weights_fp4(in.data.data(), in.scales.data(), E, 100, K, data.data(), scales.data(), bases.data()),
      Error);
}

}  // namespace
}  // namespace symmoe::gemm
