// EP buffer layout: the per-rank part of the symmetric allocation used by dispatch/combine (docs/design.md §5.2).
//
// Every rank allocates the same EpLayout in its symmetric buffer; peers reach a region through
// SymBuffer::map(local_ptr, rank). Regions, in order (T = T_max, R ranks, E experts, El = E/R, K top-k, H hidden):
//   recv_x             R*T rows of x             [row]: row = (tokens of sources < src sent here) + slot, i.e. the
//                                                non-expand output order; senders push x straight into its row
//   recv_scales        R*T scale rows            [row], same rows (FP8 only)
//   recv_meta          R*T metadata records      [src_rank][slot]: the routing part of the token record
//   combine_recv       T*K bf16 rows of H        [token][topk lane]: rows sent back to this (source) rank
//   recv_rank_counts   2*R*R u64                 [parity][src_rank][dst_rank] tokens src sends to dst (plain value),
//                                                written by src into EVERY rank: a sender finds its first output
//                                                row on dst (rows of earlier sources) locally, no remote read
//   recv_expert_counts 2*R*El u64                [parity][src_rank][local expert] tokens (plain value), written by src
//                                                Both count regions are double-buffered by the barrier epoch's
//                                                parity: a peer writes call n+1's counts BEFORE its entry barrier,
//                                                possibly while this rank still reads call n's (no second barrier)
//   recv_arrivals      R u32                     [src_rank] tokens of src that have landed here (red.add by each
//                                                sending CTA after its pushes); reset by this rank at the start of
//                                                each dispatch, before its entry barrier
//   departures         u32 (own 128-B line)      CTAs of this rank's current EP kernel past the entry barrier; the
//                                                last one advances the barrier epoch (kernels/ep/entry_barrier.cuh)
// No slot counters: slots come from a deterministic token-order scan (kernels/ep/notify.cuh) and expand rows from
// the records' expert positions, so nothing here needs resetting between calls.
//   sync                                         layout::SyncArea (runtime's): barrier slots, grid-sync state
//   (timeout error records live in the runtime's host-mapped memory, not in this buffer)
//   combine_weights    T*K*K fp32                [token][lane][j]: top-k weights returned with combine's rows
//   combine_flags      T*K u32                   [token][lane]: 1 once the row (and weights) of (token, lane) have
//                                                landed (written by the sender with release); the reducing source
//                                                resets it to 0 after use, so no epoch is needed
// A token record (one truth for what a token carries) holds x, then the scale row (FP8: fp32 per 128 channels by
// default, or EpDims::scale_row_bytes of packed UE8M0), K int32 top-k idx, K fp32 weights, K int32 expert
// positions (the lane's rank among the source's tokens of that expert, -1 if not routed: the receiver's expand
// placement) and the int32 src token global idx (src_rank * T_max + token), each field 16-byte aligned. x and the scale
// row go to the row regions, the rest (from topk_idx_offset on, the "metadata record") to recv_meta: the sender knows
// the output row (it reads the counts of earlier sources from the destination after the count exchange), so the
// receiver never copies x in non-expand mode (docs/design.md §6.1; measured: the copy epilogue was half of
// dispatch's time).
// NOTES: combine_recv is indexed by (token, top-k lane): in expand mode one row per routed lane; in non-expand mode
// one row per (token, destination rank) stored at the rank's master lane (the highest lane choosing that rank, as
// in the handle's recv_src_metadata col 1). So T*K rows is the worst case of both modes; indexing by source rank
// instead would need R*T rows (72 ranks: 9x more for K=8).
#pragma once

#include <cstdint>

#include "symmoe/layout/common.hpp"
#include "symmoe/layout/sync.hpp"

namespace symmoe::layout {

enum class TokenDtype : int {
  kBf16 = 0,     // x as bf16, no scales
  kFp8E4m3 = 1,  // x as FP8 E4M3 with one fp32 scale per token per 128 channels
};

SYMMOE_HD constexpr const char* token_dtype_name(TokenDtype d) { return d == TokenDtype::kBf16 ? "bf16" : "fp8_e4m3"; }

// Byte layout of one token record. Offsets are relative to the record start.
struct TokenRecord {
  uint32_t x_offset = 0, x_bytes = 0;
  uint32_t scales_offset = 0, scales_bytes = 0;
  uint32_t topk_idx_offset = 0, topk_weights_offset = 0, expert_pos_offset = 0, src_idx_offset = 0;
  uint32_t stride = 0;  // bytes from one record to the next (16-byte multiple: cp.async.bulk moves whole records)

  constexpr TokenRecord() = default;
  // scale_row_bytes < 0: the dtype's default (FP8: one fp32 per 128 channels; bf16: none).
  SYMMOE_HD constexpr TokenRecord(int hidden, int num_topk, TokenDtype dtype, int scale_row_bytes = -1) {
    x_bytes = static_cast<uint32_t>(hidden) * (dtype == TokenDtype::kBf16 ? 2u : 1u);
    scales_bytes = scale_row_bytes >= 0            ? static_cast<uint32_t>(scale_row_bytes)
                   : dtype == TokenDtype::kFp8E4m3 ? static_cast<uint32_t>(hidden / 128) * 4u
                                                   : 0u;
    x_offset = 0;
    scales_offset = align_up<uint32_t>(x_offset + x_bytes, kAlignMin);
    topk_idx_offset = align_up<uint32_t>(scales_offset + scales_bytes, kAlignMin);
    topk_weights_offset = align_up<uint32_t>(topk_idx_offset + 4u * num_topk, kAlignMin);
    expert_pos_offset = align_up<uint32_t>(topk_weights_offset + 4u * num_topk, kAlignMin);
    src_idx_offset = align_up<uint32_t>(expert_pos_offset + 4u * num_topk, kAlignMin);
    stride = align_up<uint32_t>(src_idx_offset + 4u, kAlignMin);
  }
  // The metadata record: the record from topk_idx_offset on (16-byte multiple).
  SYMMOE_HD constexpr uint32_t meta_stride() const { return stride - topk_idx_offset; }
};

// Typed view of one metadata record (the routing part of a token record) at `base`.
struct TokenMetaView {
  uint64_t base = 0;
  TokenRecord rec;
  SYMMOE_HD uint8_t* record() const { return at_offset<uint8_t>(base, 0); }
  SYMMOE_HD int32_t* topk_idx() const { return at_offset<int32_t>(base, 0); }  // [K]
  SYMMOE_HD float* topk_weights() const {
    return at_offset<float>(base, rec.topk_weights_offset - rec.topk_idx_offset);  // [K]
  }
  SYMMOE_HD int32_t* expert_pos() const {
    return at_offset<int32_t>(base, rec.expert_pos_offset - rec.topk_idx_offset);  // [K]
  }
  SYMMOE_HD int32_t* src_token_global_idx() const {
    return at_offset<int32_t>(base, rec.src_idx_offset - rec.topk_idx_offset);
  }
};

struct EpDims {
  int num_ranks = 1;                // R
  int num_experts = 0;              // E (E % R == 0, checked by the planner)
  int num_topk = 0;                 // K
  int hidden = 0;                   // H (multiple of 128)
  int num_max_tokens_per_rank = 0;  // T_max
  TokenDtype dtype = TokenDtype::kBf16;
  int scale_row_bytes = -1;  // bytes of one scale row; -1: the dtype's default (see TokenRecord)
  SYMMOE_HD constexpr int num_local_experts() const { return num_experts / num_ranks; }
};

class EpLayout {
 public:
  enum RegionId : int {
    kRecvX,
    kRecvScales,
    kRecvMeta,
    kCombineRecv,
    kRecvRankCounts,
    kRecvExpertCounts,
    kRecvArrivals,
    kDepartures,
    kSyncArea,
    kCombineWeights,
    kCombineFlags,
    kNumRegions
  };

  constexpr EpLayout() = default;
  // Host sizing: EpLayout(dims).num_bytes(). Kernels: EpLayout(dims, local base of the symmetric buffer).
  SYMMOE_HD explicit EpLayout(const EpDims& dims, void* base = nullptr)
      : dims_(dims), record_(dims.hidden, dims.num_topk, dims.dtype, dims.scale_row_bytes), base_(address_of(base)) {
    const uint64_t R = dims.num_ranks, T = dims.num_max_tokens_per_rank, K = dims.num_topk;
    const uint64_t H = dims.hidden, El = dims.num_local_experts();
    regions_.add(kRecvX, "recv_x", R * T * record_.x_bytes, kAlignBulk);
    regions_.add(kRecvScales, "recv_scales", R * T * record_.scales_bytes, kAlignBulk);
    regions_.add(kRecvMeta, "recv_meta", R * T * record_.meta_stride(), kAlignBulk);
    regions_.add(kCombineRecv, "combine_recv", T * K * H * 2, kAlignBulk);
    regions_.add(kRecvRankCounts, "recv_rank_counts", 2 * R * R * 8, kAlignBulk);
    regions_.add(kRecvExpertCounts, "recv_expert_counts", 2 * R * El * 8, kAlignBulk);
    regions_.add(kRecvArrivals, "recv_arrivals", R * 4, kAlignBulk);
    regions_.add(kDepartures, "departures", 4, 128);
    regions_.add(kSyncArea, "sync", SyncArea::num_bytes(dims.num_ranks), SyncArea::kAlign);
    regions_.add(kCombineWeights, "combine_weights", T * K * K * 4, kAlignBulk);
    regions_.add(kCombineFlags, "combine_flags", T * K * 4, kAlignBulk);
  }

  SYMMOE_HD constexpr uint64_t num_bytes() const { return regions_.num_bytes(); }
  SYMMOE_HD constexpr const Region& region(int id) const { return regions_[id]; }
  SYMMOE_HD constexpr const RegionList<kNumRegions>& regions() const { return regions_; }
  SYMMOE_HD constexpr const EpDims& dims() const { return dims_; }
  SYMMOE_HD constexpr const TokenRecord& token_record() const { return record_; }
  SYMMOE_HD constexpr uint64_t base() const { return base_; }

  // ---- received tokens ----
  // x (bf16 bits or e4m3) and scale row of received row `row` (< R*T_max; non-expand output order).
  SYMMOE_HD uint8_t* get_recv_x_row(int row) const {
    return at_offset<uint8_t>(base_, regions_.offset(kRecvX) + static_cast<uint64_t>(row) * record_.x_bytes);
  }
  SYMMOE_HD uint8_t* get_recv_scales_row(int row) const {
    return at_offset<uint8_t>(base_, regions_.offset(kRecvScales) + static_cast<uint64_t>(row) * record_.scales_bytes);
  }
  // Metadata record of slot `slot` of the tokens sent by `src_rank` (slot < T_max).
  SYMMOE_HD TokenMetaView get_recv_meta(int src_rank, int slot) const {
    const uint64_t idx = static_cast<uint64_t>(src_rank) * dims_.num_max_tokens_per_rank + slot;
    return {base_ + regions_.offset(kRecvMeta) + idx * record_.meta_stride(), record_};
  }

  // ---- combine ----
  // bf16 row [H] (raw bits) returned for (token, top-k lane) of this source rank.
  SYMMOE_HD uint16_t* get_combine_recv_row(int token_idx, int topk_lane) const {
    const uint64_t row = static_cast<uint64_t>(token_idx) * dims_.num_topk + topk_lane;
    return at_offset<uint16_t>(base_, regions_.offset(kCombineRecv) + row * dims_.hidden * 2);
  }

  // fp32 [K] top-k weights returned for (token, lane) of this source rank (see kernels/ep/combine.cuh).
  SYMMOE_HD float* get_combine_weights(int token_idx, int topk_lane) const {
    const uint64_t row = static_cast<uint64_t>(token_idx) * dims_.num_topk + topk_lane;
    return at_offset<float>(base_, regions_.offset(kCombineWeights)) + row * dims_.num_topk;
  }

  // Arrival flag of combine row (token, lane) on this source rank (see combine_flags above).
  SYMMOE_HD uint32_t* get_combine_flag(int token_idx, int topk_lane) const {
    const uint64_t row = static_cast<uint64_t>(token_idx) * dims_.num_topk + topk_lane;
    return at_offset<uint32_t>(base_, regions_.offset(kCombineFlags)) + row;
  }

  // ---- notify counters (plain values written by the source rank) ----
  SYMMOE_HD uint64_t* get_recv_rank_count(uint32_t parity, int src_rank, int dst_rank) const {
    const uint64_t R = dims_.num_ranks;
    return at_offset<uint64_t>(base_, regions_.offset(kRecvRankCounts)) + (parity & 1u) * R * R +
           static_cast<uint64_t>(src_rank) * R + dst_rank;
  }
  SYMMOE_HD uint64_t* get_recv_expert_count(uint32_t parity, int src_rank, int local_expert_idx) const {
    const uint64_t El = dims_.num_local_experts();
    return at_offset<uint64_t>(base_, regions_.offset(kRecvExpertCounts)) + (parity & 1u) * dims_.num_ranks * El +
           static_cast<uint64_t>(src_rank) * El + local_expert_idx;
  }

  // Tokens of `src_rank` landed here in the current dispatch (see recv_arrivals above).
  SYMMOE_HD uint32_t* get_recv_arrivals(int src_rank) const {
    return at_offset<uint32_t>(base_, regions_.offset(kRecvArrivals)) + src_rank;
  }
  SYMMOE_HD uint32_t* get_departures() const { return at_offset<uint32_t>(base_, regions_.offset(kDepartures)); }

  // ---- runtime areas (sized by the runtime's sync layout) ----
  // The cross-rank barrier slots and grid-sync state of this buffer (one kernel at a time uses it).
  SYMMOE_HD SyncArea get_sync_area() const {
    return SyncArea(at_offset<uint8_t>(base_, regions_.offset(kSyncArea)), static_cast<uint32_t>(dims_.num_ranks));
  }

 private:
  EpDims dims_;
  TokenRecord record_;
  uint64_t base_ = 0;
  RegionList<kNumRegions> regions_;
};

}  // namespace symmoe::layout
