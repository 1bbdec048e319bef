// The layout of one rank's weight allocation in MoeWeightStore (include/symmoe/weight_store.hpp), FP8 or FP4
// (El local experts, each array [El][per-expert elements], weight_store.hpp's orders):
//   w1         e4m3 or packed e2m1 bytes      w1_scales  fp32            w2  bytes      w2_scales  fp32
//   w1_codes   u32 scale codes (FP4 only)     w2_codes   u32 (FP4 only; both regions empty for FP8)
// Host sizing: WeightStoreLayout(shape, format).num_bytes(); the arrays: WeightStoreLayout(shape, format, base).
#pragma once

#include <cstddef>
#include <cstdint>

#include "symmoe/gemm.hpp"
#include "symmoe/layout/common.hpp"
#include "symmoe/shape.hpp"

namespace symmoe {

// Per local expert, in elements of each array (weight_store.hpp's layouts); the FP4 rows pack two values per byte.
struct ExpertArraySizes {
  size_t w1_bytes, w1_scales, w2_bytes, w2_scales, w1_codes, w2_codes;
  ExpertArraySizes(const MoeShape& s, gemm::WeightFormat f) {
    const size_t H = size_t(s.hidden), I = size_t(s.intermediate);
    const size_t per_byte = f == gemm::WeightFormat::kFp4 ? 2 : 1;
    w1_bytes = 2 * I * H / per_byte, w2_bytes = H * I / per_byte;
    w1_scales = (I / 128) * (H / 128) * 2, w2_scales = (H / 128) * (I / 128);
    w1_codes = f == gemm::WeightFormat::kFp4 ? (H / 128) * 2 * I : 0;
    w2_codes = f == gemm::WeightFormat::kFp4 ? (I / 128) * H : 0;
  }
  size_t total_bytes() const { return w1_bytes + w2_bytes + (w1_scales + w2_scales + w1_codes + w2_codes) * 4; }
};

namespace layout {

class WeightStoreLayout {
 public:
  enum RegionId : int { kW1, kW1Scales, kW2, kW2Scales, kW1Codes, kW2Codes, kNumRegions };

  WeightStoreLayout(const MoeShape& s, gemm::WeightFormat f, void* base = nullptr) : base_(address_of(base)) {
    const uint64_t El = static_cast<uint64_t>(s.num_local_experts());
    const ExpertArraySizes e(s, f);
    regions_.add(kW1, "w1", El * e.w1_bytes, kAlignScratch);
    regions_.add(kW1Scales, "w1_scales", El * e.w1_scales * 4, kAlignScratch);
    regions_.add(kW2, "w2", El * e.w2_bytes, kAlignScratch);
    regions_.add(kW2Scales, "w2_scales", El * e.w2_scales * 4, kAlignScratch);
    regions_.add(kW1Codes, "w1_codes", El * e.w1_codes * 4, kAlignScratch);
    regions_.add(kW2Codes, "w2_codes", El * e.w2_codes * 4, kAlignScratch);
  }

  uint64_t num_bytes() const { return regions_.num_bytes(); }
  const RegionList<kNumRegions, kAlignScratch>& regions() const { return regions_; }

  uint8_t* get_w1() const { return at_offset<uint8_t>(base_, regions_.offset(kW1)); }
  float* get_w1_scales() const { return at_offset<float>(base_, regions_.offset(kW1Scales)); }
  uint8_t* get_w2() const { return at_offset<uint8_t>(base_, regions_.offset(kW2)); }
  float* get_w2_scales() const { return at_offset<float>(base_, regions_.offset(kW2Scales)); }
  uint32_t* get_w1_codes() const { return at_offset<uint32_t>(base_, regions_.offset(kW1Codes)); }
  uint32_t* get_w2_codes() const { return at_offset<uint32_t>(base_, regions_.offset(kW2Codes)); }

 private:
  uint64_t base_ = 0;
  RegionList<kNumRegions, kAlignScratch> regions_;
};

}  // namespace layout
}  // namespace symmoe
