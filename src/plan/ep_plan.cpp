// EP dispatch/combine plan: the SM budget and the buffer size.
#include <algorithm>
#include <sstream>

#include "layout/ep_roles.hpp"
#include "plan/model.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::plan {
namespace {

// NVLink saturates well below all SMs: on the lent H200s SM pushes reach 293 GB/s with 8 SMs, 350 with 32 and
// 369 with 132, and DeepEP reaches 327-345 GB/s with 24 SMs on the same NVLink. 24 leaves the rest of the GPU to
// overlapped compute; bench ep decides.
constexpr int kEpMaxSms = 24;
// Below ~32 tokens per SM an SM mostly waits on the grid-wide count reduction (one arrival per SM), so small
// batches use fewer SMs: decode latency is set by the reductions and barriers, not by bytes.
constexpr int kEpMinTokensPerSm = 32;

}  // namespace

layout::EpDims EpPlan::dims() const {
  layout::EpDims d;
  d.num_ranks = shape.num_ranks, d.num_experts = shape.num_experts, d.num_topk = shape.num_topk;
  d.hidden = shape.hidden, d.num_max_tokens_per_rank = shape.num_max_tokens_per_rank, d.dtype = dtype;
  return d;
}

EpPlan plan_ep(const MoeShape& shape, layout::TokenDtype dtype, int num_sms, const PlanOverrides& overrides) {
  shape.validate();
  detail::check_row_counts(shape, "EP");
  SYMMOE_CHECK(num_sms >= 1, "plan", "EP: num_sms must be >= 1, got ", num_sms);
  SYMMOE_CHECK(dtype == layout::TokenDtype::kBf16 || dtype == layout::TokenDtype::kFp8E4m3, "plan",
               "EP: unknown token dtype ", static_cast<int>(dtype));
  EpPlan p;
  p.shape = shape;
  p.dtype = dtype;
  p.dispatch_warps_per_cta = layout::EpDispatchRoles::kNumWarps,
  p.combine_warps_per_cta = layout::EpCombineRoles::kNumWarps;
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
  p.buffer_bytes = layout::EpLayout(p.dims()).num_bytes();
  p.validate();
  return p;
}

void EpPlan::validate() const {
  const auto where = [&] { return " in EP plan [" + to_string() + "]"; };
  shape.validate();
  SYMMOE_CHECK(dispatch_sms >= 1 && dispatch_sms <= num_sms && combine_sms >= 1 && combine_sms <= num_sms, "plan",
               "EP SM counts must be in [1, ", num_sms, "]", where());
  constexpr int kDispatchWarps = layout::EpDispatchRoles::kNumWarps, kCombineWarps = layout::EpCombineRoles::kNumWarps;
  SYMMOE_CHECK(dispatch_warps_per_cta == kDispatchWarps && combine_warps_per_cta == kCombineWarps, "plan",
               "EP kernels are built for ", kDispatchWarps, " dispatch / ", kCombineWarps,
               " combine warps per CTA, plan says ", dispatch_warps_per_cta, " / ", combine_warps_per_cta, where());
  SYMMOE_CHECK(buffer_bytes == layout::EpLayout(dims()).num_bytes(), "plan", "EP buffer size ", buffer_bytes,
               " does not match its layout", where());
}

std::string EpPlan::to_string() const {
  std::ostringstream os;
  os << "ep " << shape.to_string() << " dtype=" << layout::token_dtype_name(dtype) << " sms=" << num_sms
     << " | dispatch (incl. notify): " << dispatch_sms << " SMs | combine: " << combine_sms << " SMs | "
     << "warps per CTA: dispatch " << dispatch_warps_per_cta << ", combine " << combine_warps_per_cta << " | buffer "
     << buffer_bytes << " B";
  return os.str();
}

}  // namespace symmoe::plan
