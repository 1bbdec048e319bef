// Golden model of EP dispatch (docs/design.md §2.1: DeepEP's EPHandle): all R ranks in one call.
//
// Notation: R ranks, E experts (E % R == 0), El = E / R, rank d owns experts [d*El, (d+1)*El), T_max max tokens per
// rank, T_s <= T_max tokens on source rank s, K top-k. Index metadata is int32 except topk_idx (int64, as DeepEP).
// Payload rows (x and the optional scale row) are opaque bytes, copied bitwise.
//
// Semantics (this header is the spec the GPU kernels are compared with, BITWISE):
// * Source-side counts of rank s: num_tokens_per_rank[d] = tokens of s with >= 1 lane on d (a token counts once per
//   destination rank); num_tokens_per_expert[e] = (token, lane) pairs of s on global expert e.
// * dst_buffer_slot_idx [T_s, K] (on s): for each destination d the MASTER lane is the HIGHEST lane k whose expert
//   lives on d; it holds s * T_max + slot, all other lanes -1. slot = position of t among the tokens s sends to d,
//   in ascending token order (the deterministic order). slot is also the token's row in d's receive-buffer region
//   [s*T_max, (s+1)*T_max).
// * Received rows on d (non-expand): ordered by source rank, then slot, i.e. by src_token_global_idx = s*T_max + t.
//   psum_num_recv_tokens_per_rank [R] = inclusive prefix sum over source ranks; num_recv_tokens = psum[R-1].
//   recv_x / recv_sf: the token's rows; recv_topk_idx [num_recv, K] int64 = local expert id (e - d*El) for lanes
//   on d, else -1; recv_topk_weights [num_recv, K] = all K weights as sent.
// * recv_src_metadata [num_recv, 2+K] int32: col 0 = s*T_max + t; col 1 = s*K + master_lane; col 2+k = (expand)
//   the expanded row that holds lane k on d, else -1 (non-expand: all -1).
// * Per local expert: num_unaligned_recv_tokens_per_expert [El] = (token, lane) pairs received; aligned count =
//   align_up(unaligned, expert_alignment); num_recv_tokens_per_expert_list (the cpu_sync host list) = aligned
//   counts; psum_num_recv_tokens_per_expert [El] (as DeepEP): non-expand = inclusive prefix sum of aligned counts;
//   expand = start_e + unaligned_e, start_e = exclusive prefix sum of aligned counts (= end of e's valid rows).
//   num_expanded_tokens = total of aligned counts (set in both modes).
// * Expand output [num_expanded_tokens rows]: one row per (received token, local lane); expert e's segment starts
//   at start_e, rows ascending in src_token_global_idx; padding rows start_e+unaligned_e .. start_e+aligned_e are
//   zeroed when zero_padding, else UNSPECIFIED (this model fills them with 0xFF bytes so a consumer that reads
//   them shows NaNs; tests must ignore them). recv_topk_idx [num_expanded] = local expert id (-1 on padding),
//   recv_topk_weights [num_expanded] = that lane's weight (0 on padding).
// * Cached dispatch: given the handles of a previous dispatch with the same topk_idx, places rows from the handle
//   alone (no counting) and returns bitwise the same outputs for the same inputs (x may differ).
// * Bad input (expert id outside [-1, E), duplicate expert within a token, T_s > T_max, row sizes that differ between
//   ranks, E % R != 0, array sizes) raises symmoe::Error naming rank, token, lane and value BEFORE any output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace symmoe::ref {

// The layer-level knobs of one dispatch; the same for all ranks.
struct DispatchConfig {
  int num_ranks = 1;                // R
  int num_experts = 0;              // E (global)
  int num_topk = 0;                 // K
  int num_max_tokens_per_rank = 0;  // T_max
  int expert_alignment = 1;         // aligned per-expert counts and expand segment starts
  bool do_expand = false;
  bool zero_padding = true;  // expand: zero the padding rows (else unspecified)
};

// What one source rank hands to dispatch. x and x_sf are opaque rows (bf16 or fp8 data; fp32 or ue8m0 scales).
struct DispatchInput {
  int num_tokens = 0;               // T_s
  int x_row_bytes = 0;              // bytes of one x row (e.g. H*2 for bf16, H for fp8)
  int sf_row_bytes = 0;             // bytes of one scale row; 0 = no scales
  std::vector<uint8_t> x;           // [T_s, x_row_bytes]
  std::vector<uint8_t> x_sf;        // [T_s, sf_row_bytes]
  std::vector<int64_t> topk_idx;    // [T_s, K] global expert id or -1
  std::vector<float> topk_weights;  // [T_s, K]
};

// One rank's handle: its source-side metadata (as sender) and destination-side metadata (as receiver).
// Field names follow DeepEP's EPHandle; DeepEP's psum_num_recv_tokens_per_scaleup_rank is named
// psum_num_recv_tokens_per_rank here (symmoe has no scale-out level).
struct EpHandle {
  // control fields
  int rank = 0, num_ranks = 1;
  bool do_expand = false;
  int num_experts = 0, num_topk = 0, expert_alignment = 1, num_max_tokens_per_rank = 0;
  int num_tokens = 0;           // T of this rank as a source
  int num_recv_tokens = 0;      // rows received (non-expand rows)
  int num_expanded_tokens = 0;  // total aligned per-expert rows
  // source side (this rank as sender)
  std::vector<int32_t> num_tokens_per_rank;    // [R]  (DeepEP get_dispatch_layout's num_tokens_per_rank)
  std::vector<int32_t> num_tokens_per_expert;  // [E]  (token, lane) pairs per global expert
  std::vector<int32_t> dst_buffer_slot_idx;    // [T, K]
  std::vector<int64_t> topk_idx;               // [T, K] copy of the routing (combine and cached dispatch read it)
  // destination side (this rank as receiver)
  std::vector<int32_t> psum_num_recv_tokens_per_rank;         // [R] inclusive
  std::vector<int32_t> num_unaligned_recv_tokens_per_expert;  // [El]
  std::vector<int32_t> psum_num_recv_tokens_per_expert;       // [El] see header comment (mode-dependent)
  std::vector<int32_t> num_recv_tokens_per_expert_list;       // [El] aligned counts (cpu_sync host list)
  std::vector<int32_t> recv_src_metadata;                     // [num_recv, 2+K]

  int num_local_experts() const { return num_experts / num_ranks; }
  int metadata_stride() const { return 2 + num_topk; }
  // Exclusive start of expert e's segment in the expanded rows (= sum of aligned counts before e).
  int expert_start(int local_expert) const;
  // Row on this rank (non-expand order) of src_token_global_idx from source s: exclusive psum + slot.
  int recv_row_begin(int src_rank) const { return src_rank == 0 ? 0 : psum_num_recv_tokens_per_rank[src_rank - 1]; }
};

// What one destination rank receives.
struct DispatchOutput {
  std::vector<uint8_t> recv_x;           // non-expand [num_recv, x_row_bytes]; expand [num_expanded, x_row_bytes]
  std::vector<uint8_t> recv_sf;          // same rows, sf_row_bytes each (empty without scales)
  std::vector<int64_t> recv_topk_idx;    // non-expand [num_recv, K]; expand [num_expanded]
  std::vector<float> recv_topk_weights;  // non-expand [num_recv, K]; expand [num_expanded]
  EpHandle handle;
};

// Fresh dispatch over all R ranks (inputs[s] for source s). Returns outputs[d] for each destination d.
std::vector<DispatchOutput> dispatch(const DispatchConfig& config, const std::vector<DispatchInput>& inputs);

// Cached dispatch: reuses handles[r] (from a previous dispatch with the same topk_idx) instead of counting.
// Throws symmoe::Error if an input's topk_idx differs from its handle's copy.
std::vector<DispatchOutput> dispatch_cached(const std::vector<EpHandle>& handles,
                                            const std::vector<DispatchInput>& inputs, bool zero_padding = true);

// Checks every metadata invariant of a dispatch result against its inputs WITHOUT re-running this model (usable on
// GPU outputs): each routed (token, rank) received exactly once, master lanes, slots, prefix sums, aligned segments,
// expand rows and their ordering, payload rows. Returns "" when all hold, else a report of the first problems.
std::string check_dispatch(const DispatchConfig& config, const std::vector<DispatchInput>& inputs,
                           const std::vector<DispatchOutput>& outputs);

}  // namespace symmoe::ref
