// The host check of a MoE layer call's arguments, shared by ComposedMoe and MegaMoe (include/symmoe/moe_args.hpp).
#include "symmoe/moe_args.hpp"

#include "symmoe/common.hpp"

namespace symmoe {
namespace {

bool aligned_to(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

void check_forward_args(const MoeShape& shape, int rank, const MoeForwardArgs& a) {
  SYMMOE_CHECK(a.num_tokens >= 0 && a.num_tokens <= shape.num_max_tokens_per_rank, "moe", "forward rank ", rank,
               ": num_tokens ", a.num_tokens, " outside [0, num_max_tokens_per_rank = ", shape.num_max_tokens_per_rank,
               "]");
  if (a.num_tokens == 0) return;
  SYMMOE_CHECK(a.x && aligned_to(a.x, 16), "moe", "forward rank ", rank,
               ": x must be a 16-byte aligned e4m3 device pointer [T, H]");
  SYMMOE_CHECK(a.x_scales && aligned_to(a.x_scales, 4), "moe", "forward rank ", rank,
               ": x_scales must be a 4-byte aligned fp32 device pointer [T, H/128] (EP asks 16 when H % 512 == 0)");
  SYMMOE_CHECK(a.topk_idx && aligned_to(a.topk_idx, 8), "moe", "forward rank ", rank,
               ": topk_idx must be an 8-byte aligned int64 device pointer [T, K]");
  SYMMOE_CHECK(a.topk_weights && aligned_to(a.topk_weights, 4), "moe", "forward rank ", rank,
               ": topk_weights must be a 4-byte aligned fp32 device pointer [T, K]");
  SYMMOE_CHECK(a.y == nullptr || aligned_to(a.y, 16), "moe", "forward rank ", rank,
               ": y must be null or a 16-byte aligned bf16 device pointer [T, H]");
}

}  // namespace symmoe
