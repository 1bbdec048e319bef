// MegaMoE workspace layout: the per-rank part of the symmetric allocation used by the fused MoE kernel
// (docs/design.md §5.3).
//
// Regions, in order (T = T_max, R ranks, E experts, El = E/R, K top-k, H hidden, I intermediate, P pool rows):
//   x                  T x H e4m3                 this rank's input tokens; peers pull rows from here
//   x_scales           T x align16(H/128 * 4) B   fp32 per token per 128 channels, token-major (pulled with x)
//   topk_idx           T x K int64                global expert id, -1 = not routed (the API's dtype, copied as is)
//   topk_weights       T x K fp32                 peers read a token's weight when they pull it
//   expert_send_count  E u64                      intra-rank grid reduction, packed (arrivals << 32) | count
//   expert_recv_count  R x El u64                 [src_rank][local expert] tokens src sends here, packed, by src
//   src_token_topk     El x R x T int32           [local expert][src_rank][i] = token * K + topk lane, by src
//   input_error        u64 + R u32                this rank's first bad routing entry (~input_error_key, atomic
//                                                 max; 0 = none), then [src_rank] = 1 when src's routing was bad
//   l1_pool_x          P x H e4m3                 L1 GEMM input rows, experts in contiguous BLOCK_M-padded segments
//   l1_pool_scales     (H/128) x P fp32           MN-major: one k-block's BLOCK_M scales are contiguous (one TMA)
//   l1_pool_weights    P fp32                     top-k weight of each pool row (applied before L2 quantisation)
//   l1_pool_src        P PoolRowSource            where each pool row came from (combine writes back there)
//   l1_arrival_count   P / kMinBlockM u32         rows of a pool block that arrived (dispatch -> L1 producer)
//   l2_pool_x          P x I e4m3                 L2 GEMM input (SwiGLU output, FP8)
//   l2_pool_scales     (I/128) x P fp32           MN-major, one scale per pool row per 128 intermediate channels
//   l2_arrival_mask    P / kMinBlockM u64         bit j: L1 n-block j (128 intermediate channels) of the block done
//   combine            T x K bf16 rows of H       [token][topk lane]: L2 output rows written back by the peers
//   sync                                          layout::SyncArea (runtime's): barrier slots, grid-sync state
//   (timeout error records live in the runtime's host-mapped memory, not in this buffer)
// NOTES: the pool (P rows) is sized for every BLOCK_M candidate and every routing (docs/design.md §5.3):
//   P = align(R*T * min(K, El) + El * (kMaxBlockM - 1), kBlockMLcm)
// a token reaches at most min(K, El) local experts, and each expert segment wastes < kMaxBlockM rows of padding.
// Counters are sized per block of the smallest candidate, so one allocation serves every plan.
#pragma once

#include <cstdint>

#include "symmoe/layout/common.hpp"
#include "symmoe/layout/sync.hpp"

namespace symmoe::layout {

// BLOCK_M candidates of the fused kernel (tokens per tile): the token-row counts of the compiled GEMM cores it
// reuses (plan::kMegaKernels): 16 and 32 on the swap-AB core (the tokens are the WGMMA's N, 256 weight rows per tile),
// 64 x 256 (the two math warpgroups split the 256 columns, 64 x 128 each) and 128 x 256 (they split the rows; each
// runs two 128-column halves sharing one partial accumulator). The planner picks one per call.
constexpr int kMegaNumBlockMCandidates = 4;
constexpr int kMegaBlockMCandidates[kMegaNumBlockMCandidates] = {16, 32, 64, 128};  // host only (planner, tests)
constexpr int kMegaMinBlockM = 16;
constexpr int kMegaMaxBlockM = 128;
constexpr int kMegaBlockMLcm = 128;  // LCM of the candidates
// The L2 arrival mask has one bit per 128 intermediate channels in a 64-bit word.
constexpr int kMegaMaxIntermediate = 64 * 128;

// Source of one pool row: the combine writes its L2 output to rank src_rank, row (src_token, src_topk).
struct PoolRowSource {
  int32_t src_rank;
  int32_t src_token;
  int32_t src_topk;
  int32_t reserved;  // keeps the record 16 bytes (one vector load)
};
static_assert(sizeof(PoolRowSource) == 16, "PoolRowSource must be one 16-byte vector");

struct MegaDims {
  int num_ranks = 1;                // R
  int num_experts = 0;              // E (E % R == 0, checked by the planner)
  int num_topk = 0;                 // K
  int hidden = 0;                   // H (multiple of 128)
  int intermediate = 0;             // I (multiple of 128, <= kMegaMaxIntermediate)
  int num_max_tokens_per_rank = 0;  // T_max
  SYMMOE_HD constexpr int num_local_experts() const { return num_experts / num_ranks; }
};

// Pool rows P (see the file comment).
SYMMOE_HD constexpr uint64_t mega_pool_rows(const MegaDims& d) {
  const uint64_t max_recv_tokens = static_cast<uint64_t>(d.num_ranks) * d.num_max_tokens_per_rank;
  const uint64_t max_copies_per_token = min_u64(d.num_topk, d.num_local_experts());
  const uint64_t max_padding = static_cast<uint64_t>(d.num_local_experts()) * (kMegaMaxBlockM - 1);
  return align_up<uint64_t>(max_recv_tokens * max_copies_per_token + max_padding, kMegaBlockMLcm);
}

class MegaLayout {
 public:
  enum RegionId : int {
    kX,
    kXScales,
    kTopkIdx,
    kTopkWeights,
    kExpertSendCount,
    kExpertRecvCount,
    kSrcTokenTopk,
    kInputError,
    kL1PoolX,
    kL1PoolScales,
    kL1PoolWeights,
    kL1PoolSrc,
    kL1ArrivalCount,
    kL2PoolX,
    kL2PoolScales,
    kL2ArrivalMask,
    kCombine,
    kSyncArea,
    kNumRegions
  };

  constexpr MegaLayout() = default;
  // Host sizing: MegaLayout(dims).num_bytes(). Kernels: MegaLayout(dims, local base of the symmetric buffer).
  SYMMOE_HD explicit MegaLayout(const MegaDims& dims, void* base = nullptr)
      : dims_(dims), base_(address_of(base)), pool_rows_(mega_pool_rows(dims)) {
    const uint64_t R = dims.num_ranks, T = dims.num_max_tokens_per_rank, E = dims.num_experts, K = dims.num_topk;
    const uint64_t H = dims.hidden, I = dims.intermediate, El = dims.num_local_experts(), P = pool_rows_;
    const uint64_t num_blocks = P / kMegaMinBlockM;
    x_scales_stride_ = align_up<uint32_t>(static_cast<uint32_t>(dims.hidden / 128) * 4u, kAlignMin);
    regions_.add(kX, "x", T * H, kAlignBulk);
    regions_.add(kXScales, "x_scales", T * x_scales_stride_, kAlignBulk);
    regions_.add(kTopkIdx, "topk_idx", T * K * 8, kAlignBulk);
    regions_.add(kTopkWeights, "topk_weights", T * K * 4, kAlignBulk);
    regions_.add(kExpertSendCount, "expert_send_count", E * 8, kAlignBulk);
    regions_.add(kExpertRecvCount, "expert_recv_count", R * El * 8, kAlignBulk);
    regions_.add(kSrcTokenTopk, "src_token_topk", El * R * T * 4, kAlignBulk);
    regions_.add(kInputError, "input_error", 8 + R * 4, kAlignBulk);
    regions_.add(kL1PoolX, "l1_pool_x", P * H, kAlignBulk);
    regions_.add(kL1PoolScales, "l1_pool_scales", (H / 128) * P * 4, kAlignBulk);
    regions_.add(kL1PoolWeights, "l1_pool_weights", P * 4, kAlignBulk);
    regions_.add(kL1PoolSrc, "l1_pool_src", P * sizeof(PoolRowSource), kAlignBulk);
    regions_.add(kL1ArrivalCount, "l1_arrival_count", num_blocks * 4, kAlignBulk);
    regions_.add(kL2PoolX, "l2_pool_x", P * I, kAlignBulk);
    regions_.add(kL2PoolScales, "l2_pool_scales", (I / 128) * P * 4, kAlignBulk);
    regions_.add(kL2ArrivalMask, "l2_arrival_mask", num_blocks * 8, kAlignBulk);
    regions_.add(kCombine, "combine", T * K * H * 2, kAlignBulk);
    regions_.add(kSyncArea, "sync", SyncArea::num_bytes(dims.num_ranks), SyncArea::kAlign);
  }

  SYMMOE_HD constexpr uint64_t num_bytes() const { return regions_.num_bytes(); }
  SYMMOE_HD constexpr const Region& region(int id) const { return regions_[id]; }
  SYMMOE_HD constexpr const RegionList<kNumRegions>& regions() const { return regions_; }
  SYMMOE_HD constexpr const MegaDims& dims() const { return dims_; }
  SYMMOE_HD constexpr uint64_t base() const { return base_; }
  SYMMOE_HD constexpr uint64_t num_pool_rows() const { return pool_rows_; }
  SYMMOE_HD constexpr uint64_t num_pool_blocks() const { return pool_rows_ / kMegaMinBlockM; }
  SYMMOE_HD constexpr uint32_t x_scales_stride() const { return x_scales_stride_; }

  // ---- inputs (this rank's tokens) ----
  SYMMOE_HD uint8_t* get_x(int token_idx) const {
    return at_offset<uint8_t>(base_, offset(kX) + static_cast<uint64_t>(token_idx) * dims_.hidden);
  }
  SYMMOE_HD float* get_x_scales(int token_idx) const {  // [H/128]
    return at_offset<float>(base_, offset(kXScales) + static_cast<uint64_t>(token_idx) * x_scales_stride_);
  }
  SYMMOE_HD int64_t* get_topk_idx(int token_idx) const {  // [K]
    return at_offset<int64_t>(base_, offset(kTopkIdx)) + static_cast<uint64_t>(token_idx) * dims_.num_topk;
  }
  SYMMOE_HD float* get_topk_weights(int token_idx) const {  // [K]
    return at_offset<float>(base_, offset(kTopkWeights)) + static_cast<uint64_t>(token_idx) * dims_.num_topk;
  }

  // ---- counts and source lists ----
  SYMMOE_HD uint64_t* get_expert_send_count(int expert_idx) const {
    return at_offset<uint64_t>(base_, offset(kExpertSendCount)) + expert_idx;
  }
  SYMMOE_HD uint64_t* get_expert_recv_count(int src_rank, int local_expert_idx) const {
    return at_offset<uint64_t>(base_, offset(kExpertRecvCount)) +
           static_cast<uint64_t>(src_rank) * dims_.num_local_experts() + local_expert_idx;
  }
  // List of (token * K + topk lane) sent by src_rank to local expert local_expert_idx; entry i < T_max.
  SYMMOE_HD int32_t* get_src_token_topk(int local_expert_idx, int src_rank, int i = 0) const {
    const uint64_t list = static_cast<uint64_t>(local_expert_idx) * dims_.num_ranks + src_rank;
    return at_offset<int32_t>(base_, offset(kSrcTokenTopk)) + list * dims_.num_max_tokens_per_rank + i;
  }

  // ---- routing errors (kernels/common/input_error.hpp): written while counting, cleared at the end of the call ----
  SYMMOE_HD unsigned long long* get_input_error_key() const {
    return at_offset<unsigned long long>(base_, offset(kInputError));
  }
  SYMMOE_HD uint32_t* get_src_input_error(int src_rank) const {  // set by src_rank on every rank
    return at_offset<uint32_t>(base_, offset(kInputError) + 8) + src_rank;
  }

  // ---- L1 pool ----
  SYMMOE_HD uint8_t* get_l1_pool_x(uint64_t pool_row) const {  // [H]
    return at_offset<uint8_t>(base_, offset(kL1PoolX) + pool_row * dims_.hidden);
  }
  SYMMOE_HD float* get_l1_pool_scale(int k_block, uint64_t pool_row) const {  // k_block < H/128
    return at_offset<float>(base_, offset(kL1PoolScales)) + static_cast<uint64_t>(k_block) * pool_rows_ + pool_row;
  }
  SYMMOE_HD float* get_l1_pool_weight(uint64_t pool_row) const {
    return at_offset<float>(base_, offset(kL1PoolWeights)) + pool_row;
  }
  SYMMOE_HD PoolRowSource* get_l1_pool_src(uint64_t pool_row) const {
    return at_offset<PoolRowSource>(base_, offset(kL1PoolSrc)) + pool_row;
  }
  // Pool block = pool_row / BLOCK_M of the running plan (< num_pool_blocks() for every candidate).
  SYMMOE_HD uint32_t* get_l1_arrival_count(uint64_t pool_block) const {
    return at_offset<uint32_t>(base_, offset(kL1ArrivalCount)) + pool_block;
  }

  // ---- L2 pool ----
  SYMMOE_HD uint8_t* get_l2_pool_x(uint64_t pool_row) const {  // [I]
    return at_offset<uint8_t>(base_, offset(kL2PoolX) + pool_row * dims_.intermediate);
  }
  SYMMOE_HD float* get_l2_pool_scale(int k_block, uint64_t pool_row) const {  // k_block < I/128
    return at_offset<float>(base_, offset(kL2PoolScales)) + static_cast<uint64_t>(k_block) * pool_rows_ + pool_row;
  }
  SYMMOE_HD uint64_t* get_l2_arrival_mask(uint64_t pool_block) const {
    return at_offset<uint64_t>(base_, offset(kL2ArrivalMask)) + pool_block;
  }

  // ---- combine (rows come back to this source rank) ----
  SYMMOE_HD uint16_t* get_combine_row(int token_idx, int topk_lane) const {  // bf16 bits [H]
    const uint64_t row = static_cast<uint64_t>(token_idx) * dims_.num_topk + topk_lane;
    return at_offset<uint16_t>(base_, offset(kCombine) + row * dims_.hidden * 2);
  }

  // ---- runtime areas ----
  // The cross-rank barrier slots and grid-sync state of this workspace (one kernel at a time uses it).
  SYMMOE_HD SyncArea get_sync_area() const {
    return SyncArea(at_offset<uint8_t>(base_, offset(kSyncArea)), static_cast<uint32_t>(dims_.num_ranks));
  }

 private:
  SYMMOE_HD constexpr uint64_t offset(int id) const { return regions_.offset(id); }

  MegaDims dims_;
  uint64_t base_ = 0;
  uint64_t pool_rows_ = 0;
  uint32_t x_scales_stride_ = 0;
  RegionList<kNumRegions> regions_;
};

}  // namespace symmoe::layout
