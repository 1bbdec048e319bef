// The host-carved device blocks (CLI layer inputs, MoeWeightStore, ComposedMoe's warm-up inputs and stage buffers)
// laid out by RegionList layouts: the same offsets and block sizes as the running-cursor carving they replaced
// (every array at the next 256-byte boundary, the block rounded up to 256), which the GPU paths were tested with.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_common/layer_inputs_layout.hpp"
#include "moe/composed_moe_layout.hpp"
#include "moe/weight_store_layout.hpp"
#include "symmoe/gemm.hpp"
#include "symmoe/shape.hpp"

namespace symmoe {
namespace {

constexpr uint64_t kFakeBase = uint64_t(1) << 44;  // a layout's base for the getter checks (never dereferenced)
void* fake_base() { return reinterpret_cast<void*>(kFakeBase); }

// The replaced carving: each array at the cursor, the cursor then rounded up to 256 past it; total = final cursor.
struct CursorCarver {
  uint64_t cursor = 0;
  uint64_t take(uint64_t bytes) {
    const uint64_t at = cursor;
    cursor = (cursor + bytes + 255) / 256 * 256;
    return at;
  }
};

// Region i of `regions` at offsets[i] with sizes[i] bytes, every region complete and aligned, num_bytes == total.
template <typename Regions>
::testing::AssertionResult same_as_carver(const Regions& regions, const std::vector<uint64_t>& offsets,
                                          const std::vector<uint64_t>& sizes, uint64_t total) {
  if (!regions.complete()) return ::testing::AssertionFailure() << "regions not added once each in id order";
  for (size_t i = 0; i < offsets.size(); ++i) {
    const layout::Region& r = regions[int(i)];
    if (r.offset != offsets[i] || r.num_bytes != sizes[i] || r.offset % 256 != 0)
      return ::testing::AssertionFailure() << "region " << r.name << ": offset " << r.offset << " bytes " << r.num_bytes
                                           << ", carver: offset " << offsets[i] << " bytes " << sizes[i];
  }
  if (regions.num_bytes() != total)
    return ::testing::AssertionFailure() << "num_bytes " << regions.num_bytes() << ", carver total " << total;
  return ::testing::AssertionSuccess();
}

uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p) - kFakeBase; }

// Named shapes at a few deployments, plus odd small ones (the CPU golden-model tests' sizes).
std::vector<MoeShape> shapes() {
  std::vector<MoeShape> v;
  for (const char* name : {"flash", "v3", "pro", "tiny"})
    for (const int R : {1, 8, 16})
      for (const int T : {1, 33, 128, 4096, 4097}) v.push_back(named_shape(name, R, T));
  MoeShape s;
  s.hidden = 128, s.intermediate = 384, s.num_experts = 6, s.num_topk = 3, s.num_ranks = 2;
  for (const int T : {1, 7, 64}) s.num_max_tokens_per_rank = T, v.push_back(s);
  return v;
}

TEST(HostLayouts, LayerInputsMatchCarver) {
  for (const MoeShape& s : shapes()) {
    SCOPED_TRACE(s.to_string());
    const uint64_t T = s.num_max_tokens_per_rank, H = s.hidden, K = s.num_topk;
    const std::vector<uint64_t> sizes = {T * H, T * (H / 128) * 4, T * K * 8, T * K * 4, T * H * 2};
    CursorCarver c;
    std::vector<uint64_t> offsets;
    for (const uint64_t b : sizes) offsets.push_back(c.take(b));
    const layout::LayerInputsLayout l(int(T), int(H), int(K), fake_base());
    ASSERT_TRUE(same_as_carver(l.regions(), offsets, sizes, c.cursor));
    ASSERT_EQ(l.num_bytes(), layout::LayerInputsLayout(int(T), int(H), int(K)).num_bytes());
    ASSERT_EQ(addr(l.get_x()), offsets[0]);
    ASSERT_EQ(addr(l.get_x_scales()), offsets[1]);
    ASSERT_EQ(addr(l.get_topk_idx()), offsets[2]);
    ASSERT_EQ(addr(l.get_topk_weights()), offsets[3]);
    ASSERT_EQ(addr(l.get_y()), offsets[4]);
  }
}

// FP8: w1, w1_scales, w2, w2_scales (the code regions empty at the end); FP4: then w1_codes, w2_codes.
TEST(HostLayouts, WeightStoreMatchesCarver) {
  for (const MoeShape& s : shapes())
    for (const auto f : {gemm::WeightFormat::kFp8, gemm::WeightFormat::kFp4}) {
      const bool fp4 = f == gemm::WeightFormat::kFp4;
      SCOPED_TRACE(s.to_string() + (fp4 ? " fp4" : " fp8"));
      const uint64_t El = s.num_local_experts();
      const ExpertArraySizes e(s, f);
      std::vector<uint64_t> sizes = {El * e.w1_bytes, El * e.w1_scales * 4, El * e.w2_bytes, El * e.w2_scales * 4};
      if (fp4) sizes.push_back(El * e.w1_codes * 4), sizes.push_back(El * e.w2_codes * 4);
      CursorCarver c;
      std::vector<uint64_t> offsets;
      for (const uint64_t b : sizes) offsets.push_back(c.take(b));
      const layout::WeightStoreLayout l(s, f, fake_base());
      ASSERT_TRUE(same_as_carver(l.regions(), offsets, sizes, c.cursor));
      ASSERT_EQ(l.num_bytes(), layout::WeightStoreLayout(s, f).num_bytes());
      ASSERT_EQ(addr(l.get_w1()), offsets[0]);
      ASSERT_EQ(addr(l.get_w1_scales()), offsets[1]);
      ASSERT_EQ(addr(l.get_w2()), offsets[2]);
      ASSERT_EQ(addr(l.get_w2_scales()), offsets[3]);
      if (fp4) {
        ASSERT_GT(sizes[4], 0u);
        ASSERT_EQ(addr(l.get_w1_codes()), offsets[4]);
        ASSERT_EQ(addr(l.get_w2_codes()), offsets[5]);
      } else {
        for (const int id : {layout::WeightStoreLayout::kW1Codes, layout::WeightStoreLayout::kW2Codes}) {
          ASSERT_EQ(l.regions()[id].num_bytes, 0u);
          ASSERT_LE(l.regions()[id].offset, l.num_bytes());
        }
      }
      // The allocation holds every local expert's arrays.
      ASSERT_GE(l.num_bytes(), El * e.total_bytes());
    }
}

TEST(HostLayouts, ComposedWarmupMatchesCarver) {
  for (const MoeShape& s : shapes()) {
    SCOPED_TRACE(s.to_string());
    const uint64_t H = s.hidden, K = s.num_topk;
    const std::vector<uint64_t> sizes = {K * 8, K * 4, H, (H / 128) * 4};
    CursorCarver c;
    std::vector<uint64_t> offsets;
    for (const uint64_t b : sizes) offsets.push_back(c.take(b));
    const layout::ComposedWarmupLayout l(int(H), int(K), fake_base());
    ASSERT_TRUE(same_as_carver(l.regions(), offsets, sizes, c.cursor));
    ASSERT_EQ(addr(l.get_topk_idx()), offsets[0]);
    ASSERT_EQ(addr(l.get_topk_weights()), offsets[1]);
    ASSERT_EQ(addr(l.get_x()), offsets[2]);
    ASSERT_EQ(addr(l.get_x_scales()), offsets[3]);
  }
}

TEST(HostLayouts, ComposedStageMatchesCarver) {
  for (const MoeShape& s : shapes())
    for (const int alignment : {1, 128}) {
      // The expand capacity's worst case shape: every (token, lane) pair of every rank, plus per-expert padding.
      const int El = s.num_local_experts(), H = s.hidden, I = s.intermediate;
      const int N = s.num_ranks * s.num_max_tokens_per_rank * s.num_topk + El * (alignment - 1);
      const int S = gemm::sfa_stride_for(N);
      SCOPED_TRACE(s.to_string() + " N=" + std::to_string(N));
      const std::vector<uint64_t> sizes = {uint64_t(El + 1) * 4, uint64_t(H / 128) * S * 4, uint64_t(N) * I,
                                           uint64_t(I / 128) * S * 4, uint64_t(N) * H * 2};
      CursorCarver c;
      std::vector<uint64_t> offsets;
      for (const uint64_t b : sizes) offsets.push_back(c.take(b));
      const layout::ComposedStageLayout l(El, H, I, N, S, fake_base());
      ASSERT_TRUE(same_as_carver(l.regions(), offsets, sizes, c.cursor));
      ASSERT_EQ(addr(l.get_segment_starts()), offsets[0]);
      ASSERT_EQ(addr(l.get_sfa()), offsets[1]);
      ASSERT_EQ(addr(l.get_l1_out()), offsets[2]);
      ASSERT_EQ(addr(l.get_l1_scales()), offsets[3]);
      ASSERT_EQ(addr(l.get_l2_out()), offsets[4]);
    }
}

// Fixed numbers for two deployments, so a change to both the layout and the carver above still shows.
TEST(HostLayouts, WeightStorePinnedSizes) {
  // Flash, 8 ranks: El = 32; w1 32*2*2048*4096, w1_scales 32*16*32*2*4, w2 32*4096*2048, w2_scales 32*32*16*4.
  const layout::WeightStoreLayout fp8(named_shape("flash", 8, 128), gemm::WeightFormat::kFp8);
  EXPECT_EQ(fp8.regions().offset(layout::WeightStoreLayout::kW1Scales), 536870912u);
  EXPECT_EQ(fp8.regions().offset(layout::WeightStoreLayout::kW2), 536870912u + 131072u);
  EXPECT_EQ(fp8.regions().offset(layout::WeightStoreLayout::kW2Scales), 536870912u + 131072u + 268435456u);
  EXPECT_EQ(fp8.num_bytes(), 536870912u + 131072u + 268435456u + 65536u);
  // V3, 1 rank, FP4: El = 256, H = 7168, I = 2048; the block exceeds 4 GiB (64-bit offsets).
  const layout::WeightStoreLayout fp4(named_shape("v3", 1, 128), gemm::WeightFormat::kFp4);
  const uint64_t w1 = 256ull * 2 * 2048 * 7168 / 2, s1 = 256ull * 16 * 56 * 2 * 4, w2 = 256ull * 7168 * 2048 / 2;
  const uint64_t s2 = 256ull * 56 * 16 * 4, c1 = 256ull * 56 * 2 * 2048 * 4, c2 = 256ull * 16 * 7168 * 4;
  EXPECT_EQ(fp4.regions().offset(layout::WeightStoreLayout::kW2Codes), w1 + s1 + w2 + s2 + c1);
  EXPECT_EQ(fp4.num_bytes(), w1 + s1 + w2 + s2 + c1 + c2);
}

}  // namespace
}  // namespace symmoe
