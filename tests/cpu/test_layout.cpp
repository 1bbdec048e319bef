// Layout property tests: for every deployment of the sweep, the EP buffer and the MegaMoE workspace have their
// regions in order, aligned and disjoint, every pointer getter lands inside its own region with the alignment its
// consumer needs, sizes grow with tokens, and the pool holds the worst-case routing for every BLOCK_M candidate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "symmoe/layout/ep.hpp"
#include "layout/ep_handle.hpp"
#include "layout/ep_roles.hpp"
#include "layout/ep_scratch.hpp"
#include "layout/mega_smem.hpp"
#include "symmoe/layout/mega.hpp"
#include "test_plan_sweep.hpp"

namespace symmoe {
namespace {

using layout::EpLayout;
using layout::MegaLayout;

constexpr uint64_t kFakeBase = uint64_t(1) << 44;  // 1024-aligned, far from 0 so an offset bug cannot hide
// A layout's base argument at kFakeBase (never dereferenced: the tests read addresses only).
void* fake_base() { return reinterpret_cast<void*>(kFakeBase); }

layout::EpDims ep_dims(const MoeShape& s, layout::TokenDtype dtype) {
  layout::EpDims d;
  d.num_ranks = s.num_ranks, d.num_experts = s.num_experts, d.num_topk = s.num_topk, d.hidden = s.hidden;
  d.num_max_tokens_per_rank = s.num_max_tokens_per_rank, d.dtype = dtype;
  return d;
}

layout::MegaDims mega_dims(const MoeShape& s) {
  layout::MegaDims d;
  d.num_ranks = s.num_ranks, d.num_experts = s.num_experts, d.num_topk = s.num_topk, d.hidden = s.hidden;
  d.intermediate = s.intermediate, d.num_max_tokens_per_rank = s.num_max_tokens_per_rank;
  return d;
}

// Regions: complete, in order, aligned (>= 16 B), disjoint, inside num_bytes; num_bytes a multiple of 1024.
template <int N>
::testing::AssertionResult regions_ok(const layout::RegionList<N>& regions, const std::string& what) {
  if (!regions.complete()) return ::testing::AssertionFailure() << what << ": regions not added once each in id order";
  uint64_t end = 0;
  for (int i = 0; i < N; ++i) {
    const layout::Region& r = regions[i];
    if (r.name == nullptr) return ::testing::AssertionFailure() << what << ": region " << i << " has no name";
    if (r.alignment < layout::kAlignMin || r.offset % r.alignment != 0)
      return ::testing::AssertionFailure()
             << what << ": region " << r.name << " offset " << r.offset << " not aligned to " << r.alignment;
    if (r.offset < end)
      return ::testing::AssertionFailure()
             << what << ": region " << r.name << " at " << r.offset << " overlaps the previous one ending at " << end;
    end = r.offset + r.num_bytes;
  }
  if (end > regions.num_bytes() || regions.num_bytes() % layout::kBaseAlignment != 0)
    return ::testing::AssertionFailure() << what << ": end " << end << " vs num_bytes " << regions.num_bytes();
  return ::testing::AssertionSuccess();
}

// [ptr, ptr + bytes) inside region `id` of a layout placed at kFakeBase, and ptr aligned to `alignment`.
template <typename Layout>
::testing::AssertionResult inside(const Layout& l, int id, const void* ptr, uint64_t bytes, uint64_t alignment,
                                  const char* what) {
  const uint64_t p = reinterpret_cast<uint64_t>(ptr);
  const layout::Region& r = l.region(id);
  const uint64_t lo = kFakeBase + r.offset, hi = lo + r.num_bytes;
  if (p < lo || p + bytes > hi)
    return ::testing::AssertionFailure() << what << ": [" << p - kFakeBase << ", " << p - kFakeBase + bytes
                                         << ") outside region " << r.name << " [" << r.offset << ", "
                                         << r.offset + r.num_bytes << ")";
  if (p % alignment != 0)
    return ::testing::AssertionFailure() << what << ": offset " << p - kFakeBase << " not aligned to " << alignment;
  return ::testing::AssertionSuccess();
}

void check_ep(const MoeShape& s, layout::TokenDtype dtype) {
  SCOPED_TRACE(s.to_string() + " dtype=" + layout::token_dtype_name(dtype));
  const auto dims = ep_dims(s, dtype);
  const EpLayout l = EpLayout(dims, fake_base());
  ASSERT_EQ(l.num_bytes(), EpLayout(dims).num_bytes());
  ASSERT_TRUE(regions_ok(l.regions(), "ep"));
  const int R = s.num_ranks, T = s.num_max_tokens_per_rank, K = s.num_topk, H = s.hidden, E = s.num_experts;
  const int El = E / R;

  // Token record: every field 16-byte aligned, fields disjoint, stride a 16-byte multiple covering all fields.
  const layout::TokenRecord& rec = l.token_record();
  const uint32_t x_bytes = H * (dtype == layout::TokenDtype::kBf16 ? 2 : 1);
  const uint32_t scale_bytes = dtype == layout::TokenDtype::kFp8E4m3 ? H / 128 * 4 : 0;
  ASSERT_EQ(rec.x_bytes, x_bytes);
  ASSERT_EQ(rec.scales_bytes, scale_bytes);
  for (const uint32_t off :
       {rec.x_offset, rec.scales_offset, rec.topk_idx_offset, rec.topk_weights_offset, rec.src_idx_offset, rec.stride})
    ASSERT_EQ(off % 16, 0u);
  ASSERT_GE(rec.scales_offset, rec.x_offset + x_bytes);
  ASSERT_GE(rec.topk_idx_offset, rec.scales_offset + scale_bytes);
  ASSERT_GE(rec.topk_weights_offset, rec.topk_idx_offset + 4u * K);
  ASSERT_GE(rec.src_idx_offset, rec.topk_weights_offset + 4u * K);
  ASSERT_GE(rec.stride, rec.src_idx_offset + 4u);

  // The receive rows hold the worst case: every token of every rank.
  ASSERT_EQ(l.region(EpLayout::kRecvX).num_bytes, uint64_t(R) * T * x_bytes);
  ASSERT_EQ(l.region(EpLayout::kRecvScales).num_bytes, uint64_t(R) * T * scale_bytes);
  ASSERT_EQ(l.region(EpLayout::kRecvMeta).num_bytes, uint64_t(R) * T * rec.meta_stride());
  ASSERT_EQ(l.region(EpLayout::kCombineRecv).num_bytes, uint64_t(T) * K * H * 2);
  ASSERT_TRUE(inside(l, EpLayout::kRecvX, l.get_recv_x_row(R * T - 1), x_bytes, 16, "recv x row"));
  if (scale_bytes) {
    ASSERT_TRUE(inside(l, EpLayout::kRecvScales, l.get_recv_scales_row(R * T - 1), scale_bytes, 4, "recv scales"));
  }

  for (const int src : {0, R / 2, R - 1})
    for (const int slot : {0, T / 2, T - 1}) {
      const auto v = l.get_recv_meta(src, slot);
      ASSERT_TRUE(inside(l, EpLayout::kRecvMeta, v.record(), rec.meta_stride(), 16, "recv meta"));
      ASSERT_EQ(reinterpret_cast<uint64_t>(v.record()) - kFakeBase - l.region(EpLayout::kRecvMeta).offset,
                (uint64_t(src) * T + slot) * rec.meta_stride());
      ASSERT_TRUE(inside(l, EpLayout::kRecvMeta, v.topk_weights(), 4u * K, 16, "recv weights"));
      ASSERT_TRUE(inside(l, EpLayout::kRecvMeta, v.src_token_global_idx(), 4, 16, "recv src idx"));
    }
  ASSERT_TRUE(
      inside(l, EpLayout::kCombineRecv, l.get_combine_recv_row(T - 1, K - 1), uint64_t(H) * 2, 16, "combine row"));
  ASSERT_TRUE(inside(l, EpLayout::kCombineRecv, l.get_combine_recv_row(0, 0), uint64_t(H) * 2, 128, "combine row 0"));
  ASSERT_TRUE(inside(l, EpLayout::kRecvRankCounts, l.get_recv_rank_count(1, R - 1, R - 1), 8, 8, "recv rank count"));
  ASSERT_TRUE(inside(l, EpLayout::kRecvArrivals, l.get_recv_arrivals(R - 1), 4, 4, "recv arrivals"));
  ASSERT_TRUE(inside(l, EpLayout::kRecvExpertCounts, l.get_recv_expert_count(1, R - 1, El - 1), 8, 8, "recv expert"));
  const layout::SyncArea sync = l.get_sync_area();
  ASSERT_TRUE(
      inside(l, EpLayout::kSyncArea, sync.base, layout::SyncArea::num_bytes(R), layout::SyncArea::kAlign, "sync area"));
  ASSERT_EQ(sync.num_ranks, uint32_t(R));
}

void check_mega(const MoeShape& s) {
  SCOPED_TRACE(s.to_string());
  const auto dims = mega_dims(s);
  const MegaLayout l = MegaLayout(dims, fake_base());
  ASSERT_EQ(l.num_bytes(), MegaLayout(dims).num_bytes());
  ASSERT_TRUE(regions_ok(l.regions(), "mega"));
  const int R = s.num_ranks, T = s.num_max_tokens_per_rank, K = s.num_topk, H = s.hidden, I = s.intermediate;
  const int E = s.num_experts, El = E / R;
  const uint64_t P = l.num_pool_rows();
  ASSERT_EQ(P, layout::mega_pool_rows(dims));
  ASSERT_EQ(P % layout::kMegaBlockMLcm, 0u);
  ASSERT_EQ(l.num_pool_blocks() * layout::kMegaMinBlockM, P);

  ASSERT_TRUE(inside(l, MegaLayout::kX, l.get_x(T - 1), H, 128, "x row"));
  ASSERT_TRUE(inside(l, MegaLayout::kXScales, l.get_x_scales(T - 1), H / 128 * 4, 16, "x scales"));
  ASSERT_TRUE(inside(l, MegaLayout::kTopkIdx, l.get_topk_idx(T - 1), 8u * K, 8, "topk idx"));
  ASSERT_TRUE(inside(l, MegaLayout::kTopkWeights, l.get_topk_weights(T - 1), 4u * K, 4, "topk weights"));
  ASSERT_TRUE(inside(l, MegaLayout::kExpertSendCount, l.get_expert_send_count(E - 1), 8, 8, "send count"));
  ASSERT_TRUE(inside(l, MegaLayout::kExpertRecvCount, l.get_expert_recv_count(R - 1, El - 1), 8, 8, "recv count"));
  ASSERT_TRUE(inside(l, MegaLayout::kSrcTokenTopk, l.get_src_token_topk(El - 1, R - 1, T - 1), 4, 4, "src list"));
  ASSERT_TRUE(
      inside(l, MegaLayout::kSrcTokenTopk, l.get_src_token_topk(El - 1, R - 1), uint64_t(T) * 4, 4, "src list start"));
  ASSERT_TRUE(inside(l, MegaLayout::kInputError, l.get_input_error_key(), 8, 8, "input error key"));
  ASSERT_TRUE(inside(l, MegaLayout::kInputError, l.get_src_input_error(R - 1), 4, 4, "src input error"));
  // The lists of different (expert, src rank) pairs do not overlap.
  if (R > 1) {
    ASSERT_EQ(l.get_src_token_topk(0, 1) - l.get_src_token_topk(0, 0), T);
  }

  for (const uint64_t row : {uint64_t(0), P / 2, P - 1}) {
    ASSERT_TRUE(inside(l, MegaLayout::kL1PoolX, l.get_l1_pool_x(row), H, 128, "l1 pool row"));
    ASSERT_TRUE(inside(l, MegaLayout::kL2PoolX, l.get_l2_pool_x(row), I, 128, "l2 pool row"));
    ASSERT_TRUE(inside(l, MegaLayout::kL1PoolScales, l.get_l1_pool_scale(H / 128 - 1, row), 4, 4, "l1 scale"));
    ASSERT_TRUE(inside(l, MegaLayout::kL2PoolScales, l.get_l2_pool_scale(I / 128 - 1, row), 4, 4, "l2 scale"));
    ASSERT_TRUE(inside(l, MegaLayout::kL1PoolWeights, l.get_l1_pool_weight(row), 4, 4, "pool weight"));
    ASSERT_TRUE(inside(l, MegaLayout::kL1PoolSrc, l.get_l1_pool_src(row), 16, 16, "pool src"));
  }
  // Scales are MN-major: one k-block's BLOCK_M scales are contiguous and 16-byte aligned for every candidate.
  for (int c = 0; c < layout::kMegaNumBlockMCandidates; ++c) {
    const int bm = layout::kMegaBlockMCandidates[c];
    const uint64_t last_block_row = P - bm;
    ASSERT_TRUE(inside(l, MegaLayout::kL1PoolScales, l.get_l1_pool_scale(H / 128 - 1, last_block_row), bm * 4, 16,
                       "l1 scale block"));
    ASSERT_TRUE(inside(l, MegaLayout::kL2PoolScales, l.get_l2_pool_scale(I / 128 - 1, last_block_row), bm * 4, 16,
                       "l2 scale block"));
    ASSERT_LT((P - 1) / bm, l.num_pool_blocks());
  }
  ASSERT_TRUE(
      inside(l, MegaLayout::kL1ArrivalCount, l.get_l1_arrival_count(l.num_pool_blocks() - 1), 4, 4, "l1 arrival"));
  ASSERT_TRUE(inside(l, MegaLayout::kL2ArrivalMask, l.get_l2_arrival_mask(l.num_pool_blocks() - 1), 8, 8, "l2 mask"));
  ASSERT_TRUE(inside(l, MegaLayout::kCombine, l.get_combine_row(T - 1, K - 1), uint64_t(H) * 2, 16, "combine row"));
  ASSERT_TRUE(inside(l, MegaLayout::kSyncArea, l.get_sync_area().base, layout::SyncArea::num_bytes(R),
                     layout::SyncArea::kAlign, "sync"));
}

// The largest sum over experts of align(n_e, block_m) any routing can produce, built by an adversary: each expert
// first gets one token (a full block of padding), then whole blocks while it stays <= the per-expert cap.
uint64_t adversarial_padded_rows(uint64_t num_pairs, uint64_t cap_per_expert, uint64_t num_experts, uint64_t bm) {
  std::vector<uint64_t> n(num_experts, 0);
  uint64_t left = num_pairs;
  for (auto& c : n)
    if (left > 0) c = 1, left -= 1;
  for (bool progress = true; left > 0 && progress;) {
    progress = false;
    for (auto& c : n) {
      const uint64_t add = std::min({bm, left, cap_per_expert - c});
      if (add > 0) c += add, left -= add, progress = true;
    }
  }
  EXPECT_EQ(left, 0u) << "the adversary must place every pair";
  uint64_t rows = 0;
  for (const auto c : n) rows += (c + bm - 1) / bm * bm;
  return rows;
}

TEST(Layout, EpEveryDeployment) {
  test::for_each_deployment([](const std::string&, const MoeShape& s) {
    check_ep(s, layout::TokenDtype::kBf16);
    check_ep(s, layout::TokenDtype::kFp8E4m3);
  });
}

// EpHandle storage: regions complete and disjoint, each getter at the start of its region.
void check_ep_handle(const MoeShape& s) {
  SCOPED_TRACE(s.to_string());
  using layout::EpHandleLayout;
  const auto dims = ep_dims(s, layout::TokenDtype::kBf16);
  const EpHandleLayout l(dims, fake_base());
  ASSERT_EQ(l.num_bytes(), EpHandleLayout(dims).num_bytes());
  ASSERT_TRUE(regions_ok(l.regions(), "ep handle"));
  const uint64_t R = s.num_ranks, E = s.num_experts, T = s.num_max_tokens_per_rank, K = s.num_topk, El = E / R;
  ASSERT_TRUE(inside(l, EpHandleLayout::kNumTokensPerRank, l.get_num_tokens_per_rank(), R * 4, 16, "per rank"));
  ASSERT_TRUE(inside(l, EpHandleLayout::kNumTokensPerExpert, l.get_num_tokens_per_expert(), E * 4, 16, "per expert"));
  ASSERT_TRUE(inside(l, EpHandleLayout::kDstBufferSlotIdx, l.get_dst_buffer_slot_idx(), T * K * 4, 16, "slots"));
  ASSERT_TRUE(inside(l, EpHandleLayout::kTopkIdx, l.get_topk_idx(), T * K * 8, 16, "topk idx"));
  ASSERT_TRUE(inside(l, EpHandleLayout::kPsumNumRecvTokensPerRank, l.get_psum_num_recv_tokens_per_rank(), R * 4, 16,
                     "psum per rank"));
  ASSERT_TRUE(inside(l, EpHandleLayout::kNumUnalignedRecvTokensPerExpert, l.get_num_unaligned_recv_tokens_per_expert(),
                     El * 4, 16, "unaligned"));
  ASSERT_TRUE(inside(l, EpHandleLayout::kPsumNumRecvTokensPerExpert, l.get_psum_num_recv_tokens_per_expert(), El * 4,
                     16, "psum per expert"));
  ASSERT_TRUE(
      inside(l, EpHandleLayout::kNumRecvTokensPerExpert, l.get_num_recv_tokens_per_expert(), El * 4, 16, "aligned"));
  ASSERT_TRUE(
      inside(l, EpHandleLayout::kRecvSrcMetadata, l.get_recv_src_metadata(), R * T * (2 + K) * 4, 16, "src metadata"));
  ASSERT_TRUE(inside(l, EpHandleLayout::kDeviceCounts, l.get_device_counts(), EpHandleLayout::kNumDeviceCounts * 4, 16,
                     "device counts"));
}

TEST(Layout, EpHandleEveryDeployment) {
  test::for_each_deployment([](const std::string&, const MoeShape& s) { check_ep_handle(s); });
}

// EpBuffer's per-rank scratch (workspace, combined outputs, dispatch outputs): regions complete and disjoint, every
// array on a kAlignScratch boundary, each getter at the start of its region; non-expand keeps no x or scale rows.
void check_ep_scratch(const MoeShape& s, layout::TokenDtype dtype) {
  SCOPED_TRACE(s.to_string() + " dtype=" + layout::token_dtype_name(dtype));
  using layout::EpCombinedLayout, layout::EpOutputsLayout, layout::EpWorkspaceLayout;
  constexpr uint64_t A = layout::kAlignScratch;
  const auto dims = ep_dims(s, dtype);
  const uint64_t R = s.num_ranks, E = s.num_experts, T = s.num_max_tokens_per_rank, K = s.num_topk, H = s.hidden;
  const int num_ctas = 132;
  const EpWorkspaceLayout w(dims, num_ctas, fake_base());
  ASSERT_EQ(w.num_bytes(), EpWorkspaceLayout(dims, num_ctas).num_bytes());
  ASSERT_TRUE(regions_ok(w.regions(), "ep workspace"));
  const uint64_t warps = uint64_t(num_ctas) * layout::EpDispatchRoles::kNumWarps;
  ASSERT_TRUE(inside(w, EpWorkspaceLayout::kWarpCounts, w.get_warp_counts(), warps * (R + E) * 4, A, "warp counts"));
  ASSERT_TRUE(inside(w, EpWorkspaceLayout::kErrorKey, w.get_error_key(), 8, A, "error key"));
  const EpCombinedLayout c(dims, fake_base());
  ASSERT_TRUE(regions_ok(c.regions(), "ep combined"));
  ASSERT_TRUE(inside(c, EpCombinedLayout::kCombinedX, c.get_combined_x(), T * H * 2, A, "combined x"));
  ASSERT_TRUE(
      inside(c, EpCombinedLayout::kCombinedTopkWeights, c.get_combined_topk_weights(), T * K * 4, A, "weights"));
  const layout::TokenRecord rec(dims.hidden, dims.num_topk, dims.dtype, dims.scale_row_bytes);
  const uint64_t rows = R * T * K;
  for (const bool expand : {false, true}) {
    const EpOutputsLayout o(dims, rows, expand, fake_base());
    ASSERT_TRUE(regions_ok(o.regions(), "ep outputs"));
    const uint64_t x_rows = expand ? rows : 0;
    ASSERT_EQ(o.region(EpOutputsLayout::kRecvX).num_bytes, x_rows * rec.x_bytes);
    ASSERT_EQ(o.region(EpOutputsLayout::kRecvScales).num_bytes, x_rows * rec.scales_bytes);
    ASSERT_TRUE(inside(o, EpOutputsLayout::kRecvTopkIdx, o.get_recv_topk_idx(), rows * K * 8, A, "topk idx"));
    ASSERT_TRUE(inside(o, EpOutputsLayout::kRecvTopkWeights, o.get_recv_topk_weights(), rows * K * 4, A, "weights"));
    if (expand) {
      ASSERT_TRUE(inside(o, EpOutputsLayout::kRecvX, o.get_recv_x(), rows * rec.x_bytes, A, "recv x"));
      if (rec.scales_bytes) {
        ASSERT_TRUE(
            inside(o, EpOutputsLayout::kRecvScales, o.get_recv_scales(), rows * rec.scales_bytes, A, "recv scales"));
      }
    }
  }
}

TEST(Layout, EpScratchEveryDeployment) {
  test::for_each_deployment([](const std::string&, const MoeShape& s) {
    check_ep_scratch(s, layout::TokenDtype::kBf16);
    check_ep_scratch(s, layout::TokenDtype::kFp8E4m3);
  });
}

// The fused kernel's per-expert counts in shared memory: arrays back to back inside num_bytes, and the scheduler's
// offsets from seg_start land on num_rows and wave_last.
TEST(Layout, MegaSmemCounts) {
  for (const int R : {1, 2, 8, 72})
    for (const int El : {1, 8, 31, 32, 33, 256}) {
      const layout::MegaSmemCounts c{kFakeBase, R, El};
      const auto at = [&](const void* p) { return int64_t(reinterpret_cast<uint64_t>(p) - kFakeBase); };
      ASSERT_EQ(at(c.chunk_start()), 0);
      ASSERT_EQ(at(c.seg_start()), int64_t(R) * El * 4);
      ASSERT_EQ(at(c.num_rows()), at(c.seg_start()) + (El + 1) * 4);
      ASSERT_EQ(at(c.num_rows()), at(c.seg_start() + layout::MegaSmemCounts::num_rows_from_seg_start(El)));
      ASSERT_EQ(at(c.wave_last()), at(c.seg_start() + layout::MegaSmemCounts::wave_last_from_seg_start(El)));
      ASSERT_EQ(at(c.wave_last()), at(c.num_rows()) + El * 4);
      ASSERT_LE(at(c.wave_last() + (El + 31) / 32), c.num_bytes());
      ASSERT_EQ(c.num_bytes() % 16, 0);
      ASSERT_EQ(c.num_bytes(), layout::MegaSmemCounts::num_bytes(R * El, El));
    }
}

TEST(Layout, MegaEveryDeployment) {
  test::for_each_deployment([](const std::string&, const MoeShape& s) { check_mega(s); });
}

TEST(Layout, BytesGrowWithTokens) {
  for (const auto& name : test::sweep_shape_names())
    for (const int r : test::sweep_ranks(name)) {
      uint64_t prev_ep = 0, prev_mega = 0;
      for (const int t : test::sweep_tokens()) {
        const MoeShape s = named_shape(name, r, t);
        const uint64_t ep = EpLayout(ep_dims(s, layout::TokenDtype::kFp8E4m3)).num_bytes();
        const uint64_t mega = MegaLayout(mega_dims(s)).num_bytes();
        ASSERT_GT(ep, prev_ep) << s.to_string();
        ASSERT_GT(mega, prev_mega) << s.to_string();
        prev_ep = ep, prev_mega = mega;
      }
    }
}

// Worst case: every token of every rank routed to this rank's experts, each expert segment padded to BLOCK_M.
TEST(Layout, PoolHoldsWorstCaseRoutingForEveryBlockM) {
  test::for_each_deployment([](const std::string&, const MoeShape& s) {
    const auto dims = mega_dims(s);
    const uint64_t P = layout::mega_pool_rows(dims);
    const uint64_t El = dims.num_local_experts();
    const uint64_t per_expert_cap = uint64_t(s.num_ranks) * s.num_max_tokens_per_rank;  // one copy per token
    const uint64_t pairs = per_expert_cap * std::min<uint64_t>(s.num_topk, El);
    for (int c = 0; c < layout::kMegaNumBlockMCandidates; ++c) {
      const uint64_t bm = layout::kMegaBlockMCandidates[c];
      // Analytic bound: sum align(n_e) <= min(El * align(cap), pairs + El * (bm - 1)).
      const uint64_t bound = std::min(El * ((per_expert_cap + bm - 1) / bm * bm), pairs + El * (bm - 1));
      ASSERT_LE(bound, P) << s.to_string() << " BLOCK_M=" << bm;
      ASSERT_LE(adversarial_padded_rows(pairs, per_expert_cap, El, bm), P) << s.to_string() << " BLOCK_M=" << bm;
    }
  });
}

// Random routings (uniform, one hot expert set, masked lanes) on small deployments, every token of every rank
// counted: the padded expert segments fit the pool for every BLOCK_M.
TEST(Layout, PoolHoldsRandomRoutings) {
  std::mt19937 rng(1234);
  for (const int r : {1, 2, 4, 8, 16}) {
    for (const int t : {1, 3, 17, 64, 129}) {
      const MoeShape s = named_shape("tiny", r, t);
      const auto dims = mega_dims(s);
      const int El = dims.num_local_experts();
      const uint64_t P = layout::mega_pool_rows(dims);
      for (int trial = 0; trial < 6; ++trial) {
        std::vector<uint64_t> count(El, 0);
        for (int tok = 0; tok < r * t; ++tok) {
          // K distinct experts; trial 0-1 uniform, 2-3 skewed toward this rank (local experts first), 4-5 masked.
          std::vector<int> experts(s.num_experts);
          for (int e = 0; e < s.num_experts; ++e) experts[e] = e;
          if (trial >= 2 && trial < 4)
            std::shuffle(experts.begin(), experts.begin() + El, rng);
          else
            std::shuffle(experts.begin(), experts.end(), rng);
          for (int k = 0; k < s.num_topk; ++k) {
            if (trial >= 4 && rng() % 3 == 0) continue;   // -1 lane
            if (experts[k] < El) count[experts[k]] += 1;  // this rank owns experts [0, El)
          }
        }
        for (int c = 0; c < layout::kMegaNumBlockMCandidates; ++c) {
          const uint64_t bm = layout::kMegaBlockMCandidates[c];
          uint64_t rows = 0;
          for (const auto n : count) rows += (n + bm - 1) / bm * bm;
          ASSERT_LE(rows, P) << s.to_string() << " trial " << trial << " BLOCK_M=" << bm;
        }
      }
    }
  }
}

TEST(Layout, CandidateConstantsAgree) {
  int lcm = 1, lo = 1 << 30, hi = 0;
  for (int c = 0; c < layout::kMegaNumBlockMCandidates; ++c) {
    const int bm = layout::kMegaBlockMCandidates[c];
    int a = lcm, b = bm;
    while (b) a %= b, std::swap(a, b);
    lcm = lcm / a * bm, lo = std::min(lo, bm), hi = std::max(hi, bm);
  }
  EXPECT_EQ(lcm, layout::kMegaBlockMLcm);
  EXPECT_EQ(lo, layout::kMegaMinBlockM);
  EXPECT_EQ(hi, layout::kMegaMaxBlockM);
}

// The pool formula (docs/design.md §5.3) on V3, 8 ranks, 4096 tokens: 8*4096*8 pairs + 32 experts * 127 rows of
// padding (BLOCK_M up to 128, pool rounded to the candidates' LCM 128).
TEST(Layout, PoolFormulaExample) {
  const MoeShape s = named_shape("v3", 8, 4096);
  EXPECT_EQ(layout::mega_pool_rows(mega_dims(s)), (8ull * 4096 * 8 + 32 * 127 + 127) / 128 * 128);
  // min(K, El) copies: 64 ranks leave 4 local experts, fewer than K = 8.
  const MoeShape s64 = named_shape("v3", 64, 16);
  EXPECT_EQ(layout::mega_pool_rows(mega_dims(s64)), (64ull * 16 * 4 + 4 * 127 + 127) / 128 * 128);
}

}  // namespace
}  // namespace symmoe
