// ComposedMoe's device blocks (composed_moe.cpp): the warm-up dispatch's one-token inputs and each rank's stage
// buffers between EP and the grouped GEMMs (El local experts, N expand row capacity, S = sfa stride >= N):
//   ComposedWarmupLayout  topk_idx [K] int64, topk_weights [K] fp32, x [H] e4m3, x_scales [H/128] fp32
//   ComposedStageLayout   segment_starts [El + 1] int32, sfa [H/128][S] fp32, l1_out [N][I] e4m3,
//                         l1_scales [I/128][S] fp32, l2_out [N][H] bf16
// Host sizing: XLayout(...).num_bytes(); the pointers: XLayout(..., base).get_*().
#pragma once

#include <cstdint>

#include "symmoe/layout/common.hpp"

namespace symmoe::layout {

class ComposedWarmupLayout {
 public:
  enum RegionId : int { kTopkIdx, kTopkWeights, kX, kXScales, kNumRegions };

  ComposedWarmupLayout(int hidden, int num_topk, void* base = nullptr) : base_(address_of(base)) {
    const uint64_t H = hidden, K = num_topk;
    regions_.add(kTopkIdx, "topk_idx", K * 8, kAlignScratch);
    regions_.add(kTopkWeights, "topk_weights", K * 4, kAlignScratch);
    regions_.add(kX, "x", H, kAlignScratch);
    regions_.add(kXScales, "x_scales", (H / 128) * 4, kAlignScratch);
  }

  uint64_t num_bytes() const { return regions_.num_bytes(); }
  const RegionList<kNumRegions, kAlignScratch>& regions() const { return regions_; }

  int64_t* get_topk_idx() const { return at_offset<int64_t>(base_, regions_.offset(kTopkIdx)); }
  float* get_topk_weights() const { return at_offset<float>(base_, regions_.offset(kTopkWeights)); }
  uint8_t* get_x() const { return at_offset<uint8_t>(base_, regions_.offset(kX)); }
  float* get_x_scales() const { return at_offset<float>(base_, regions_.offset(kXScales)); }

 private:
  uint64_t base_ = 0;
  RegionList<kNumRegions, kAlignScratch> regions_;
};

class ComposedStageLayout {
 public:
  enum RegionId : int { kSegmentStarts, kSfa, kL1Out, kL1Scales, kL2Out, kNumRegions };

  // row_capacity: the expand layout's rows (EpBuffer::row_capacity); sfa_stride: gemm::sfa_stride_for(row_capacity).
  ComposedStageLayout(int num_local_experts, int hidden, int intermediate, int row_capacity, int sfa_stride,
                      void* base = nullptr)
      : base_(address_of(base)) {
    const uint64_t El = num_local_experts, H = hidden, I = intermediate, N = row_capacity, S = sfa_stride;
    regions_.add(kSegmentStarts, "segment_starts", (El + 1) * 4, kAlignScratch);
    regions_.add(kSfa, "sfa", (H / 128) * S * 4, kAlignScratch);
    regions_.add(kL1Out, "l1_out", N * I, kAlignScratch);
    regions_.add(kL1Scales, "l1_scales", (I / 128) * S * 4, kAlignScratch);
    regions_.add(kL2Out, "l2_out", N * H * 2, kAlignScratch);
  }

  uint64_t num_bytes() const { return regions_.num_bytes(); }
  const RegionList<kNumRegions, kAlignScratch>& regions() const { return regions_; }

  int32_t* get_segment_starts() const { return at_offset<int32_t>(base_, regions_.offset(kSegmentStarts)); }
  float* get_sfa() const { return at_offset<float>(base_, regions_.offset(kSfa)); }
  uint8_t* get_l1_out() const { return at_offset<uint8_t>(base_, regions_.offset(kL1Out)); }
  float* get_l1_scales() const { return at_offset<float>(base_, regions_.offset(kL1Scales)); }
  uint16_t* get_l2_out() const { return at_offset<uint16_t>(base_, regions_.offset(kL2Out)); }

 private:
  uint64_t base_ = 0;
  RegionList<kNumRegions, kAlignScratch> regions_;
};

}  // namespace symmoe::layout
