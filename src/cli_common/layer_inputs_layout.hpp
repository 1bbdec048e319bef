// The CLI's device block of one rank's layer inputs and output (DeviceLayerInputs, moe_inputs.hpp), T = T_max rows:
//   x             [T][H] e4m3
//   x_scales      [T][H/128] fp32
//   topk_idx      [T][K] int64
//   topk_weights  [T][K] fp32
//   y             [T][H] bf16
// Host sizing: LayerInputsLayout(T, H, K).num_bytes(); the pointers: LayerInputsLayout(T, H, K, base).get_*().
#pragma once

#include <cstdint>

#include "symmoe/layout/common.hpp"

namespace symmoe::layout {

class LayerInputsLayout {
 public:
  enum RegionId : int { kX, kXScales, kTopkIdx, kTopkWeights, kY, kNumRegions };

  LayerInputsLayout(int num_max_tokens, int hidden, int num_topk, void* base = nullptr) : base_(address_of(base)) {
    const uint64_t T = num_max_tokens, H = hidden, K = num_topk;
    regions_.add(kX, "x", T * H, kAlignScratch);
    regions_.add(kXScales, "x_scales", T * (H / 128) * 4, kAlignScratch);
    regions_.add(kTopkIdx, "topk_idx", T * K * 8, kAlignScratch);
    regions_.add(kTopkWeights, "topk_weights", T * K * 4, kAlignScratch);
    regions_.add(kY, "y", T * H * 2, kAlignScratch);
  }

  uint64_t num_bytes() const { return regions_.num_bytes(); }
  const RegionList<kNumRegions, kAlignScratch>& regions() const { return regions_; }

  uint8_t* get_x() const { return at_offset<uint8_t>(base_, regions_.offset(kX)); }
  float* get_x_scales() const { return at_offset<float>(base_, regions_.offset(kXScales)); }
  int64_t* get_topk_idx() const { return at_offset<int64_t>(base_, regions_.offset(kTopkIdx)); }
  float* get_topk_weights() const { return at_offset<float>(base_, regions_.offset(kTopkWeights)); }
  uint16_t* get_y() const { return at_offset<uint16_t>(base_, regions_.offset(kY)); }

 private:
  uint64_t base_ = 0;
  RegionList<kNumRegions, kAlignScratch> regions_;
};

}  // namespace symmoe::layout
