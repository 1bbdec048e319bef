// EP dispatch/combine plan: SM budget, warps, per-SM token chunks, shared-memory staging, buffer size.
#include <algorithm>
#include <sstream>

#include "plan/model.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::plan {
namespace {

// NVLink saturates well below all SMs: on the lent H200s SM pushes reach 293 GB/s with 8 SMs, 350 with 32 and
// 369 with 132, and DeepEP reaches 327-345 GB/s with 24 SMs on the same NVLink. 24 leaves the rest of the GPU to
// overlapped compute; bench ep decides.
constexpr int kEpMaxSms = 24;
// Below ~32 tokens per SM (4 per warp) an SM mostly waits on the grid-wide count reduction (one arrival per SM),
// so small batches use fewer SMs: decode latency is set by the reductions and barriers, not by bytes.
constexpr int kEpMinTokensPerSm = 32;
constexpr int kEpWarpsPerSm = 8;

}  // namespace

layout::EpDims EpPlan::dims() const {
  layout::EpDims d;
  d.num_ranks = shape.num_ranks, d.num_experts = shape.num_experts, d.num_topk = shape.num_topk;
  d.hidden = shape.hidden, d.num_max_tokens_per_rank = shape.num_max_tokens_per_rank, d.dtype = dtype;
  return d;
}

EpPlan plan_ep(const MoeShape& shape, layout::TokenDtype dtype, int num_sms, const PlanOverrides& overrides) {
  shape.validate();
  SYMMOE_CHECK(num_sms >= 1, "plan", "EP: num_sms must be >= 1, got ", num_sms);
  SYMMOE_CHECK(dtype == layout::TokenDtype::kBf16 || dtype == layout::TokenDtype::kFp8E4m3, "plan",
               "EP: unknown token dtype ", static_cast<int>(dtype));
  EpPlan p;
  p.shape = shape;
  p.dtype = dtype;
  p.num_sms = num_sms;
  const int T = shape.num_max_tokens_per_rank;

  // SMs (the one place the override applies). Combine moves about the bytes dispatch moves (one bf16 row per
  // (token, rank) back), so it gets the same budget.
  int sms = std::min({num_sms, kEpMaxSms, ceil_div(T, kEpMinTokensPerSm)});
  if (overrides.ep_sms) {
    SYMMOE_CHECK(overrides.ep_sms <= num_sms, "plan", "SYMMOE_EP_SMS=", overrides.ep_sms, " exceeds the ", num_sms,
                 " SMs available");
    sms = overrides.ep_sms;
  }
  p.dispatch_sms = p.combine_sms = std::max(sms, 1);
  p.dispatch_warps_per_sm = p.combine_warps_per_sm = kEpWarpsPerSm;
  // Chunking: each SM owns a contiguous range of tokens (deterministic ownership; a warp takes every
  // warps_per_sm-th token of it), so the slot counters are touched by few SMs per destination.
  p.dispatch_tokens_per_sm = ceil_div(T, p.dispatch_sms);
  p.combine_tokens_per_sm = ceil_div(T, p.combine_sms);

  // Staging: a warp loads a token record into shared memory and bulk-stores it to the destination ranks. Two
  // buffers per warp overlap the next load with the current stores; fall back to one, then to fewer warps, when
  // a record is large (bf16, large H).
  const layout::TokenRecord record(shape.hidden, shape.num_topk, dtype);
  p.token_record_bytes = record.stride;
  const int room = hopper::kMaxSmemPerBlock - detail::kSmemAlignSlack - detail::kSmemFixedBarriers;
  p.dispatch_buffers_per_warp = 2;
  while (p.dispatch_buffers_per_warp > 1 &&
         p.dispatch_warps_per_sm * p.dispatch_buffers_per_warp * static_cast<long long>(record.stride) > room)
    p.dispatch_buffers_per_warp -= 1;
  while (p.dispatch_warps_per_sm > 1 && p.dispatch_warps_per_sm * static_cast<long long>(record.stride) > room)
    p.dispatch_warps_per_sm -= 1;
  p.dispatch_smem_bytes = detail::kSmemAlignSlack + detail::kSmemFixedBarriers +
                          p.dispatch_warps_per_sm * p.dispatch_buffers_per_warp * static_cast<int>(record.stride);
  p.combine_chunk_elems = 256;
  p.buffer_bytes = layout::EpLayout(p.dims()).num_bytes();
  p.validate();
  return p;
}

void EpPlan::validate() const {
  const auto where = [&] { return " in EP plan [" + to_string() + "]"; };
  shape.validate();
  SYMMOE_CHECK(dispatch_sms >= 1 && dispatch_sms <= num_sms && combine_sms >= 1 && combine_sms <= num_sms, "plan",
               "EP SM counts must be in [1, ", num_sms, "]", where());
  SYMMOE_CHECK(dispatch_warps_per_sm >= 1 && dispatch_warps_per_sm <= 32 && combine_warps_per_sm >= 1 &&
                   combine_warps_per_sm <= 32,
               "plan", "warps per SM must be in [1, 32]", where());
  SYMMOE_CHECK(static_cast<long long>(dispatch_tokens_per_sm) * dispatch_sms >= shape.num_max_tokens_per_rank &&
                   static_cast<long long>(combine_tokens_per_sm) * combine_sms >= shape.num_max_tokens_per_rank,
               "plan", "token chunks do not cover T_max", where());
  SYMMOE_CHECK(dispatch_buffers_per_warp >= 1 && dispatch_smem_bytes <= hopper::kMaxSmemPerBlock, "plan",
               "dispatch staging ", dispatch_smem_bytes, " B exceeds shared memory (token record ", token_record_bytes,
               " B)", where());
  SYMMOE_CHECK(token_record_bytes % 16 == 0 && combine_chunk_elems % 8 == 0, "plan",
               "records must be 16-byte multiples and combine chunks whole 16-byte vectors", where());
}

std::string EpPlan::to_string() const {
  std::ostringstream os;
  os << "ep " << shape.to_string() << " dtype=" << layout::token_dtype_name(dtype) << " sms=" << num_sms
     << " | dispatch (incl. notify): " << dispatch_sms << " SMs x " << dispatch_warps_per_sm << " warps, "
     << dispatch_tokens_per_sm << " tokens/SM, " << dispatch_buffers_per_warp << " record buffer(s)/warp, smem "
     << dispatch_smem_bytes << " B | combine: " << combine_sms << " SMs x " << combine_warps_per_sm << " warps, "
     << combine_tokens_per_sm << " tokens/SM, " << combine_chunk_elems << " elems/warp step | record "
     << token_record_bytes << " B, buffer " << buffer_bytes << " B";
  return os.str();
}

}  // namespace symmoe::plan
