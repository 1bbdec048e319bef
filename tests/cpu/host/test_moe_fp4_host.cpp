// Host side of FP4 expert weights in the MoE layer (no GPU): the per-rank view check (format, pointers, scale codes
// exactly with FP4), the FP4 expert check MoeWeightStore::from_host_fp4 runs before it allocates (shapes, sizes,
// fold range; errors name expert and matrix), the synthetic FP4 generator (deterministic, distinct per expert,
// foldable, variance ~1/fan_in) and the store's byte counts (FP8 unchanged).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/compare.hpp"
#include "symmoe/moe_weights.hpp"
#include "symmoe/weight_store.hpp"

namespace symmoe {
namespace {

using test::error_of;

template <typename T>
const T* fake(uintptr_t addr) {
  return reinterpret_cast<const T*>(addr);
}

MoeRankWeights fp8_view() {
  MoeRankWeights w;
  w.w1 = fake<uint8_t>(0x10000), w.w1_scales = fake<float>(0x20000);
  w.w2 = fake<uint8_t>(0x30000), w.w2_scales = fake<float>(0x40000);
  return w;
}

MoeRankWeights fp4_view() {
  MoeRankWeights w = fp8_view();
  w.format = gemm::WeightFormat::kFp4;
  w.w1_scale_codes = fake<uint32_t>(0x50000), w.w2_scale_codes = fake<uint32_t>(0x60000);
  return w;
}

TEST(MoeFp4HostChecks, RankWeights) {
  EXPECT_EQ(error_of([] { check_rank_weights(fp8_view(), 0, "moe"); }), "");
  EXPECT_EQ(error_of([] { check_rank_weights(fp4_view(), 0, "moe"); }), "");
  MoeRankWeights w = fp4_view();
  w.w1_scale_codes = nullptr;
  std::string e = error_of([&] { check_rank_weights(w, 3, "moe"); });
  EXPECT_NE(e.find("rank 3"), std::string::npos) << e;
  EXPECT_NE(e.find("null w1_scale_codes"), std::string::npos) << e;
  w = fp4_view();
  w.w2_scale_codes = nullptr;
  EXPECT_NE(error_of([&] { check_rank_weights(w, 0, "moe"); }).find("null w2_scale_codes"), std::string::npos);
  w = fp8_view();
  w.w2_scale_codes = fake<uint32_t>(0x60000);
  EXPECT_NE(error_of([&] { check_rank_weights(w, 0, "moe"); }).find("weights.format is kFp8"), std::string::npos);
  w = fp4_view();
  w.format = static_cast<gemm::WeightFormat>(5);
  EXPECT_NE(error_of([&] { check_rank_weights(w, 0, "moe"); }).find("weights.format must be"), std::string::npos);
  w = fp4_view();
  w.w2 = nullptr;
  EXPECT_NE(error_of([&] { check_rank_weights(w, 0, "mega"); }).find("a weight pointer is null"), std::string::npos);
}

MoeShape small_shape() {
  MoeShape s;
  s.hidden = 256, s.intermediate = 128, s.num_experts = 8, s.num_topk = 2, s.num_ranks = 2;
  s.num_max_tokens_per_rank = 4;
  return s;
}

TEST(MoeFp4HostChecks, Expert) {
  const MoeShape s = small_shape();
  const auto good = synthetic::host_expert_fp4(s.hidden, s.intermediate, 4, 11);
  EXPECT_EQ(error_of([&] { check_expert_fp4(s, 4, good); }), "");
  auto w = good;
  w.w1.num_rows = s.intermediate;  // gate rows only
  std::string e = error_of([&] { check_expert_fp4(s, 4, w); });
  EXPECT_NE(e.find("expert 4 w1 is [128, 256], expected [256, 256]"), std::string::npos) << e;
  w = good;
  w.w2.data.resize(w.w2.data.size() * 2);  // one byte per element
  e = error_of([&] { check_expert_fp4(s, 4, w); });
  EXPECT_NE(e.find("expert 4 w2.data holds"), std::string::npos) << e;
  w = good;
  w.w1.scales_ue8m0.resize(w.w1.scales_ue8m0.size() / 4);  // one code per 128 columns
  e = error_of([&] { check_expert_fp4(s, 4, w); });
  EXPECT_NE(e.find("expert 4 w1.scales_ue8m0 holds"), std::string::npos) << e;
  w = good;
  w.w2.scales_ue8m0[0] = 0xFF;  // the NaN code
  e = error_of([&] { check_expert_fp4(s, 4, w); });
  EXPECT_NE(e.find("expert 4 w2"), std::string::npos) << e;
  EXPECT_NE(e.find("NaN"), std::string::npos) << e;
  w = good;
  w.w1.scales_ue8m0[1] = uint8_t(w.w1.scales_ue8m0[0] + 20);  // a block spanning > 14 binades
  e = error_of([&] { check_expert_fp4(s, 4, w); });
  EXPECT_NE(e.find("expert 4 w1"), std::string::npos) << e;
  EXPECT_NE(e.find("binades"), std::string::npos) << e;
}

TEST(MoeFp4SyntheticWeights, DeterministicDistinctFoldableAndScaled) {
  const int H = 256, I = 128;
  const auto a = synthetic::host_expert_fp4(H, I, 5, 77), b = synthetic::host_expert_fp4(H, I, 5, 77);
  EXPECT_EQ(a.w1.data, b.w1.data);
  EXPECT_EQ(a.w1.scales_ue8m0, b.w1.scales_ue8m0);
  EXPECT_EQ(a.w2.data, b.w2.data);
  const auto c = synthetic::host_expert_fp4(H, I, 6, 77), d = synthetic::host_expert_fp4(H, I, 5, 78);
  EXPECT_NE(a.w1.data, c.w1.data);
  EXPECT_NE(a.w1.data, d.w1.data);
  EXPECT_NE(a.w2.scales_ue8m0, c.w2.scales_ue8m0);
  const ref::ExpertWeights folded = ref::fold_expert_fp4(a);  // throws if a block is outside the exact range
  EXPECT_EQ(folded.w1.num_rows, 2 * I);
  // Mean square of the dequantised weights ~ 1/fan_in (codes 3 binades around fp4_base_code).
  for (const Fp4Weights* m : {&a.w1, &a.w2}) {
    double sq = 0;
    for (int r = 0; r < m->num_rows; ++r)
      for (int col = 0; col < m->num_cols; ++col) sq += double(m->dequant(r, col)) * m->dequant(r, col);
    const double fan_in = m->num_cols, ms = sq / (double(m->num_rows) * m->num_cols);
    EXPECT_GT(ms * fan_in, 0.5) << "W" << (m == &a.w1 ? 1 : 2);
    EXPECT_LT(ms * fan_in, 3.0) << "W" << (m == &a.w1 ? 1 : 2);
  }
}

TEST(MoeFp4Store, ExpertBytes) {
  const MoeShape s = named_shape("flash", 1, 1);
  const size_t H = 4096, I = 2048;
  // FP8: e4m3 data + fp32 per-128x128 scales (the value bandwidth metrics used before FP4 existed).
  EXPECT_EQ(MoeWeightStore::expert_bytes(s), 3 * H * I + ((2 * I / 128) * (H / 128) + (H / 128) * (I / 128)) * 4);
  EXPECT_EQ(MoeWeightStore::expert_bytes(s, gemm::WeightFormat::kFp8), MoeWeightStore::expert_bytes(s));
  // FP4: half the data bytes, the same base scales, + one int32 of 4 UE8M0 codes per row per 128 columns.
  EXPECT_EQ(MoeWeightStore::expert_bytes(s, gemm::WeightFormat::kFp4),
            3 * H * I / 2 + ((2 * I / 128) * (H / 128) + (H / 128) * (I / 128)) * 4 + (2 * I * H + H * I) / 128 * 4);
}

}  // namespace
}  // namespace symmoe
