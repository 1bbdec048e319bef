// Device storage of one EpHandle (symmoe/ep.hpp): the dispatch metadata a cached dispatch and combine reuse, one
// allocation per handle. Regions, in order (T = T_max, R ranks, E experts, El = E/R, K top-k), int32 unless noted:
//   num_tokens_per_rank                   [R]            source side: tokens this rank sends to each rank
//   num_tokens_per_expert                 [E]            source side: (token, lane) pairs per global expert
//   dst_buffer_slot_idx                   [T][K]         source side: rank * T_max + slot at master lanes, else -1
//   topk_idx                              [T][K] int64   source side: copy of the routing
//   psum_num_recv_tokens_per_rank         [R]            receive side: inclusive prefix over sources
//   num_unaligned_recv_tokens_per_expert  [El]
//   psum_num_recv_tokens_per_expert       [El]
//   num_recv_tokens_per_expert            [El]           aligned counts
//   recv_src_metadata                     [R*T][2 + K]
//   device_counts                         [3]            num_recv_tokens, num_expanded_tokens, bad-routing flag
// Host sizing: EpHandleLayout(dims).num_bytes(); the handle's pointers: EpHandleLayout(dims, base).get_*().
#pragma once

#include <cstdint>

#include "symmoe/layout/common.hpp"
#include "symmoe/layout/ep.hpp"

namespace symmoe::layout {

class EpHandleLayout {
 public:
  enum RegionId : int {
    kNumTokensPerRank,
    kNumTokensPerExpert,
    kDstBufferSlotIdx,
    kTopkIdx,
    kPsumNumRecvTokensPerRank,
    kNumUnalignedRecvTokensPerExpert,
    kPsumNumRecvTokensPerExpert,
    kNumRecvTokensPerExpert,
    kRecvSrcMetadata,
    kDeviceCounts,
    kNumRegions
  };
  static constexpr int kNumDeviceCounts = 3;

  SYMMOE_HD explicit EpHandleLayout(const EpDims& dims, void* base = nullptr) : base_(address_of(base)) {
    const uint64_t R = dims.num_ranks, E = dims.num_experts, T = dims.num_max_tokens_per_rank;
    const uint64_t K = dims.num_topk, El = dims.num_local_experts();
    regions_.add(kNumTokensPerRank, "num_tokens_per_rank", R * 4, kAlignBulk);
    regions_.add(kNumTokensPerExpert, "num_tokens_per_expert", E * 4, kAlignBulk);
    regions_.add(kDstBufferSlotIdx, "dst_buffer_slot_idx", T * K * 4, kAlignBulk);
    regions_.add(kTopkIdx, "topk_idx", T * K * 8, kAlignBulk);
    regions_.add(kPsumNumRecvTokensPerRank, "psum_num_recv_tokens_per_rank", R * 4, kAlignBulk);
    regions_.add(kNumUnalignedRecvTokensPerExpert, "num_unaligned_recv_tokens_per_expert", El * 4, kAlignBulk);
    regions_.add(kPsumNumRecvTokensPerExpert, "psum_num_recv_tokens_per_expert", El * 4, kAlignBulk);
    regions_.add(kNumRecvTokensPerExpert, "num_recv_tokens_per_expert", El * 4, kAlignBulk);
    regions_.add(kRecvSrcMetadata, "recv_src_metadata", R * T * (2 + K) * 4, kAlignBulk);
    regions_.add(kDeviceCounts, "device_counts", kNumDeviceCounts * 4, kAlignBulk);
  }

  SYMMOE_HD constexpr uint64_t num_bytes() const { return regions_.num_bytes(); }
  SYMMOE_HD constexpr const Region& region(int id) const { return regions_[id]; }
  SYMMOE_HD constexpr const RegionList<kNumRegions>& regions() const { return regions_; }

  SYMMOE_HD int32_t* get_num_tokens_per_rank() const { return i32(kNumTokensPerRank); }
  SYMMOE_HD int32_t* get_num_tokens_per_expert() const { return i32(kNumTokensPerExpert); }
  SYMMOE_HD int32_t* get_dst_buffer_slot_idx() const { return i32(kDstBufferSlotIdx); }
  SYMMOE_HD int64_t* get_topk_idx() const { return at_offset<int64_t>(base_, regions_.offset(kTopkIdx)); }
  SYMMOE_HD int32_t* get_psum_num_recv_tokens_per_rank() const { return i32(kPsumNumRecvTokensPerRank); }
  SYMMOE_HD int32_t* get_num_unaligned_recv_tokens_per_expert() const { return i32(kNumUnalignedRecvTokensPerExpert); }
  SYMMOE_HD int32_t* get_psum_num_recv_tokens_per_expert() const { return i32(kPsumNumRecvTokensPerExpert); }
  SYMMOE_HD int32_t* get_num_recv_tokens_per_expert() const { return i32(kNumRecvTokensPerExpert); }
  SYMMOE_HD int32_t* get_recv_src_metadata() const { return i32(kRecvSrcMetadata); }
  SYMMOE_HD int32_t* get_device_counts() const { return i32(kDeviceCounts); }

 private:
  SYMMOE_HD int32_t* i32(int id) const { return at_offset<int32_t>(base_, regions_.offset(id)); }

  uint64_t base_ = 0;
  RegionList<kNumRegions> regions_;
};

}  // namespace symmoe::layout
