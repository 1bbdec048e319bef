// Host-side argument checks of EP dispatch/combine (no GPU needed; tests/cpu/host/test_ep_host.cpp runs them).
#include <cstdint>

#include "symmoe/ep.hpp"

namespace symmoe {
namespace {

bool aligned_to(const void* p, uintptr_t bytes) { return (reinterpret_cast<uintptr_t>(p) % bytes) == 0; }

}  // namespace

const char* ep_scales_name(EpScales s) {
  switch (s) {
    case EpScales::kNone:
      return "none";
    case EpScales::kFp32Per128:
      return "fp32_per128";
    case EpScales::kUe8m0Per32:
      return "ue8m0_per32";
    case EpScales::kUe8m0Per128:
      return "ue8m0_per128";
  }
  return "unknown";
}

int ep_scale_row_bytes(EpScales scales, int hidden) {
  SYMMOE_CHECK(hidden > 0 && hidden % 128 == 0, "ep", "hidden must be a positive multiple of 128, got ", hidden);
  switch (scales) {
    case EpScales::kNone:
      return 0;
    case EpScales::kFp32Per128:
      return hidden / 128 * 4;
    case EpScales::kUe8m0Per32:
      return hidden / 32;  // 4 UE8M0 bytes per int32: H/128 ints
    case EpScales::kUe8m0Per128:
      return (hidden / 128 + 3) / 4 * 4;  // packed into whole int32s
  }
  SYMMOE_FAIL("ep", "unknown scale format ", int(scales));
}

void EpBufferConfig::validate(int num_ranks) const {
  SYMMOE_CHECK(num_ranks >= 1 && num_ranks <= 72, "ep", "num_ranks must be in [1, 72], got ", num_ranks);
  SYMMOE_CHECK(num_max_tokens_per_rank >= 1, "ep", "num_max_tokens_per_rank must be >= 1, got ",
               num_max_tokens_per_rank);
  SYMMOE_CHECK(hidden > 0 && hidden % 128 == 0, "ep", "hidden must be a positive multiple of 128, got ", hidden);
  SYMMOE_CHECK(num_experts > 0 && num_experts % num_ranks == 0, "ep", "num_experts (", num_experts,
               ") must be a positive multiple of num_ranks (", num_ranks, ")");
  SYMMOE_CHECK(num_topk >= 1 && num_topk <= 32 && num_topk <= num_experts, "ep",
               "num_topk must be in [1, min(32, num_experts)], got ", num_topk);
  SYMMOE_CHECK(dtype == EpDtype::kBf16 || dtype == EpDtype::kFp8E4m3, "ep", "unknown dtype ", int(dtype));
  SYMMOE_CHECK((dtype == EpDtype::kBf16) == (scales == EpScales::kNone), "ep", "dtype ",
               dtype == EpDtype::kBf16 ? "bf16" : "fp8_e4m3", " needs scales ",
               dtype == EpDtype::kBf16 ? "none" : "fp32_per128, ue8m0_per32 or ue8m0_per128", ", got ",
               ep_scales_name(scales));
  ep_scale_row_bytes(scales, hidden);
  // Token counts travel as int32 and rows as int64 byte offsets; R*T_max*K must stay below 2^31.
  SYMMOE_CHECK(int64_t(num_ranks) * num_max_tokens_per_rank * num_topk < (int64_t(1) << 31), "ep",
               "R * T_max * K = ", int64_t(num_ranks) * num_max_tokens_per_rank * num_topk, " exceeds int32 rows");
}

void check_dispatch_args(const EpBufferConfig& config, int num_ranks, int rank, const EpDispatchArgs& args,
                         const EpDispatchOptions& options) {
  config.validate(num_ranks);
  SYMMOE_CHECK(args.num_tokens >= 0 && args.num_tokens <= config.num_max_tokens_per_rank, "ep", "dispatch rank ", rank,
               ": num_tokens ", args.num_tokens,
               " outside [0, num_max_tokens_per_rank = ", config.num_max_tokens_per_rank, "]");
  SYMMOE_CHECK(options.expert_alignment >= 1 && options.expert_alignment <= 1024, "ep", "dispatch rank ", rank,
               ": expert_alignment must be in [1, 1024], got ", options.expert_alignment);
  SYMMOE_CHECK(options.num_sms >= 0, "ep", "dispatch rank ", rank, ": num_sms must be >= 0, got ", options.num_sms);
  const bool any_out = args.recv_x_out || args.recv_scales_out || args.recv_topk_idx_out || args.recv_topk_weights_out;
  SYMMOE_CHECK(!any_out || args.out_rows > 0, "ep", "dispatch rank ", rank,
               ": out_rows must give the rows of the caller's outputs, got ", args.out_rows);
  SYMMOE_CHECK(args.recv_x_out == nullptr || aligned_to(args.recv_x_out, 16), "ep", "dispatch rank ", rank,
               ": recv_x_out must be 16-byte aligned, got ", args.recv_x_out);
  SYMMOE_CHECK(args.recv_scales_out == nullptr || aligned_to(args.recv_scales_out, 4), "ep", "dispatch rank ", rank,
               ": recv_scales_out must be 4-byte aligned, got ", args.recv_scales_out);
  SYMMOE_CHECK(args.recv_topk_idx_out == nullptr || aligned_to(args.recv_topk_idx_out, 8), "ep", "dispatch rank ", rank,
               ": recv_topk_idx_out must be 8-byte aligned");
  SYMMOE_CHECK(args.recv_topk_weights_out == nullptr || aligned_to(args.recv_topk_weights_out, 4), "ep",
               "dispatch rank ", rank, ": recv_topk_weights_out must be 4-byte aligned");
  if (args.num_tokens == 0) return;
  SYMMOE_CHECK(args.x != nullptr && aligned_to(args.x, 16), "ep", "dispatch rank ", rank,
               ": x must be a 16-byte aligned device pointer, got ", args.x);
  const int sf_bytes = ep_scale_row_bytes(config.scales, config.hidden);
  if (sf_bytes == 0) {
    SYMMOE_CHECK(args.x_scales == nullptr, "ep", "dispatch rank ", rank, ": x_scales given but dtype bf16 has none");
  } else {
    SYMMOE_CHECK(args.x_scales != nullptr && aligned_to(args.x_scales, sf_bytes % 16 == 0 ? 16 : 4), "ep",
                 "dispatch rank ", rank, ": x_scales (", ep_scales_name(config.scales),
                 ") must be a device pointer aligned to ", sf_bytes % 16 == 0 ? 16 : 4, " bytes, got ", args.x_scales);
  }
  SYMMOE_CHECK(args.topk_idx != nullptr && aligned_to(args.topk_idx, 8), "ep", "dispatch rank ", rank,
               ": topk_idx must be an 8-byte aligned int64 device pointer");
  SYMMOE_CHECK(args.topk_weights != nullptr && aligned_to(args.topk_weights, 4), "ep", "dispatch rank ", rank,
               ": topk_weights must be a 4-byte aligned fp32 device pointer");
}

void check_combine_args(const EpBufferConfig& config, int rank, const EpHandle& handle, const EpCombineArgs& args,
                        const EpCombineOptions& options) {
  SYMMOE_CHECK(
      handle.rank == rank && handle.dst_buffer_slot_idx != nullptr, "ep", "combine rank ", rank, ": the handle is ",
      handle.rank < 0 ? std::string("empty (no dispatch filled it)") : "for rank " + std::to_string(handle.rank));
  SYMMOE_CHECK(handle.num_topk == config.num_topk && handle.num_experts == config.num_experts &&
                   handle.num_max_tokens_per_rank == config.num_max_tokens_per_rank,
               "ep", "combine rank ", rank, ": the handle was made for another buffer shape (K ", handle.num_topk,
               ", E ", handle.num_experts, ", T_max ", handle.num_max_tokens_per_rank, ")");
  SYMMOE_CHECK(!options.reduce_local_experts || handle.do_expand, "ep", "combine rank ", rank,
               ": reduce_local_experts needs a handle from an expand dispatch");
  SYMMOE_CHECK(options.num_sms >= 0, "ep", "combine rank ", rank, ": num_sms must be >= 0, got ", options.num_sms);
  SYMMOE_CHECK(args.x != nullptr && aligned_to(args.x, 16), "ep", "combine rank ", rank,
               ": x must be a 16-byte aligned bf16 device pointer, got ", static_cast<const void*>(args.x));
  SYMMOE_CHECK(args.bias_0 == nullptr || aligned_to(args.bias_0, 16), "ep", "combine rank ", rank,
               ": bias_0 must be 16-byte aligned");
  SYMMOE_CHECK(args.bias_1 == nullptr || aligned_to(args.bias_1, 16), "ep", "combine rank ", rank,
               ": bias_1 must be 16-byte aligned");
  SYMMOE_CHECK(args.topk_weights == nullptr || aligned_to(args.topk_weights, 4), "ep", "combine rank ", rank,
               ": topk_weights must be 4-byte aligned");
  SYMMOE_CHECK(args.combined_x_out == nullptr || aligned_to(args.combined_x_out, 16), "ep", "combine rank ", rank,
               ": combined_x_out must be 16-byte aligned, got ", static_cast<const void*>(args.combined_x_out));
  SYMMOE_CHECK(args.combined_topk_weights_out == nullptr || aligned_to(args.combined_topk_weights_out, 4), "ep",
               "combine rank ", rank, ": combined_topk_weights_out must be 4-byte aligned");
}

}  // namespace symmoe
