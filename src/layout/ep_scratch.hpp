// Device scratch of one EpBuffer rank (src/ep/ep_buffer.cpp) besides the symmetric buffer: three allocations, one
// layout each (T = T_max, R ranks, E experts, K top-k, H hidden, C CTAs, N output rows):
//   EpWorkspaceLayout  warp_counts            [C * kNumWarps][R + E] int32  dispatch's per-warp counts
//                      error_key              u64                           first bad routing entry (all ones = none)
//   EpCombinedLayout   combined_x             [T][H] bf16                   combine's outputs where the caller gives
//                      combined_topk_weights  [T][K] fp32                   none
//   EpOutputsLayout    recv_x                 [N][x row] (expand only)      dispatch's outputs where the caller gives
//                      recv_scales            [N][scale row] (expand only)  none; non-expand x and scale rows stay in
//                      recv_topk_idx          [N][K] int64                  the symmetric buffer (EpLayout), so their
//                      recv_topk_weights      [N][K] fp32                   regions are empty there
// Host sizing: XLayout(...).num_bytes(); the rank's pointers: XLayout(..., base).get_*().
// NOTES: every array starts on a kAlignScratch boundary, as if it had its own cudaMalloc.
#pragma once

#include <cstdint>

#include "symmoe/layout/common.hpp"
#include "symmoe/layout/ep.hpp"
#include "layout/ep_roles.hpp"

namespace symmoe::layout {

class EpWorkspaceLayout {
 public:
  enum RegionId : int { kWarpCounts, kErrorKey, kNumRegions };

  // num_ctas: the most dispatch CTAs a launch may use (the rank's SM count).
  SYMMOE_HD EpWorkspaceLayout(const EpDims& dims, int num_ctas, void* base = nullptr) : base_(address_of(base)) {
    const uint64_t warps = static_cast<uint64_t>(num_ctas) * EpDispatchRoles::kNumWarps;
    const uint64_t counts_per_warp = static_cast<uint64_t>(dims.num_ranks) + dims.num_experts;
    regions_.add(kWarpCounts, "warp_counts", warps * counts_per_warp * 4, kAlignScratch);
    regions_.add(kErrorKey, "error_key", 8, kAlignScratch);
  }

  SYMMOE_HD constexpr uint64_t num_bytes() const { return regions_.num_bytes(); }
  SYMMOE_HD constexpr const Region& region(int id) const { return regions_[id]; }
  SYMMOE_HD constexpr const RegionList<kNumRegions>& regions() const { return regions_; }

  SYMMOE_HD int32_t* get_warp_counts() const { return at_offset<int32_t>(base_, regions_.offset(kWarpCounts)); }
  SYMMOE_HD unsigned long long* get_error_key() const {
    return at_offset<unsigned long long>(base_, regions_.offset(kErrorKey));
  }

 private:
  uint64_t base_ = 0;
  RegionList<kNumRegions> regions_;
};

class EpCombinedLayout {
 public:
  enum RegionId : int { kCombinedX, kCombinedTopkWeights, kNumRegions };

  SYMMOE_HD explicit EpCombinedLayout(const EpDims& dims, void* base = nullptr) : base_(address_of(base)) {
    const uint64_t T = dims.num_max_tokens_per_rank, H = dims.hidden, K = dims.num_topk;
    regions_.add(kCombinedX, "combined_x", T * H * 2, kAlignScratch);
    regions_.add(kCombinedTopkWeights, "combined_topk_weights", T * K * 4, kAlignScratch);
  }

  SYMMOE_HD constexpr uint64_t num_bytes() const { return regions_.num_bytes(); }
  SYMMOE_HD constexpr const Region& region(int id) const { return regions_[id]; }
  SYMMOE_HD constexpr const RegionList<kNumRegions>& regions() const { return regions_; }

  SYMMOE_HD uint16_t* get_combined_x() const { return at_offset<uint16_t>(base_, regions_.offset(kCombinedX)); }
  SYMMOE_HD float* get_combined_topk_weights() const {
    return at_offset<float>(base_, regions_.offset(kCombinedTopkWeights));
  }

 private:
  uint64_t base_ = 0;
  RegionList<kNumRegions> regions_;
};

class EpOutputsLayout {
 public:
  enum RegionId : int { kRecvX, kRecvScales, kRecvTopkIdx, kRecvTopkWeights, kNumRegions };

  // num_rows: the row capacity of the dispatch mode (EpBuffer::row_capacity); expand: whether x and scale rows are
  // kept here (empty regions otherwise).
  SYMMOE_HD EpOutputsLayout(const EpDims& dims, uint64_t num_rows, bool expand, void* base = nullptr)
      : base_(address_of(base)) {
    const TokenRecord record(dims.hidden, dims.num_topk, dims.dtype, dims.scale_row_bytes);
    const uint64_t x_rows = expand ? num_rows : 0, K = dims.num_topk;
    regions_.add(kRecvX, "recv_x", x_rows * record.x_bytes, kAlignScratch);
    regions_.add(kRecvScales, "recv_scales", x_rows * record.scales_bytes, kAlignScratch);
    regions_.add(kRecvTopkIdx, "recv_topk_idx", num_rows * K * 8, kAlignScratch);
    regions_.add(kRecvTopkWeights, "recv_topk_weights", num_rows * K * 4, kAlignScratch);
  }

  SYMMOE_HD constexpr uint64_t num_bytes() const { return regions_.num_bytes(); }
  SYMMOE_HD constexpr const Region& region(int id) const { return regions_[id]; }
  SYMMOE_HD constexpr const RegionList<kNumRegions>& regions() const { return regions_; }

  SYMMOE_HD uint8_t* get_recv_x() const { return at_offset<uint8_t>(base_, regions_.offset(kRecvX)); }
  SYMMOE_HD uint8_t* get_recv_scales() const { return at_offset<uint8_t>(base_, regions_.offset(kRecvScales)); }
  SYMMOE_HD int64_t* get_recv_topk_idx() const { return at_offset<int64_t>(base_, regions_.offset(kRecvTopkIdx)); }
  SYMMOE_HD float* get_recv_topk_weights() const { return at_offset<float>(base_, regions_.offset(kRecvTopkWeights)); }

 private:
  uint64_t base_ = 0;
  RegionList<kNumRegions> regions_;
};

}  // namespace symmoe::layout
