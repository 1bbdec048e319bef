// Expert-parallel dispatch and combine over NVLink symmetric memory (docs/design.md §2.1, §2.2, §6;
// DeepEP's EPHandle). The GPU kernels reproduce the golden model (include/symmoe/reference/dispatch.hpp, combine.hpp)
// BITWISE: that header is the semantic spec; this one is the contract of the GPU API.
//
// Contract:
// - One EpBuffer serves the ranks a Communicator drives (all R ranks in-process, or one rank per process). Every
//   call takes one argument struct per LOCAL rank (in Communicator::local_ranks() order), launches every rank's
//   kernels asynchronously on its stream, and (cpu_sync) waits for them. All ranks must make the same sequence of
//   calls (dispatch and combine are collective).
// - Shapes and dtypes (T = num_tokens of the rank <= T_max, H hidden, K top-k, E experts, El = E / R):
//     x             device, [T, H] bf16 (dtype kBf16) or E4M3 bytes (kFp8E4m3), rows contiguous
//     x_scales      device, [T, scale_row_bytes] (kFp32Per128: fp32 [H/128]; kUe8m0Per32 / kUe8m0Per128: UE8M0
//                   bytes packed four per int32, [H/32] or [H/128] bytes); null when scales == kNone
//     topk_idx      device int64 [T, K], global expert id or -1; topk_weights device fp32 [T, K]
//   Dispatch outputs (device memory OWNED BY THE EpBuffer, valid until the next dispatch of this buffer: copy what
//   must outlive it; symmoe.ElasticBuffer copies them into tensors of its caller, as DeepEP returns):
//     recv_x        non-expand [num_recv_tokens, H], expand [num_expanded_tokens, H] (dtype of x)
//     recv_scales   same rows, scale_row_bytes each (row-major)
//     recv_topk_idx int64, non-expand [num_recv, K] (local expert id or -1), expand [num_expanded] (-1 padding)
//     recv_topk_weights fp32, shaped like recv_topk_idx (expand padding 0)
//   Row counts are exact: num_recv_tokens counts (token, destination rank) pairs, so a token whose lanes are all -1
//   (masked) is received nowhere; num_expanded_tokens counts routed (token, expert) pairs plus alignment padding.
//   Combine outputs: combined_x bf16 [T, H]; combined_topk_weights fp32 [T, K] (only when combine got
//   topk_weights); written into EpCombineArgs::combined_x_out / combined_topk_weights_out when given (the caller
//   owns them), else into EpBuffer memory valid until the next combine.
//   Capacity is the worst case (EpBuffer::row_capacity: R*T_max rows; expand R*T_max*min(K, El) + El*(alignment-1)),
//   so no call overflows. EpDispatchArgs::*_out: the same outputs written into memory the caller owns.
//   Non-expand recv_x / recv_scales are rows of the symmetric buffer itself (the senders push into them), so they
//   stay valid until this rank's next dispatch (peers write them only after every rank has entered it).
// - EpHandle (one per local rank; DeepEP's field names) OWNS its device metadata; a fresh dispatch fills it, a
//   cached dispatch and combine read it. It stays valid across calls until destroyed.
// - cpu_sync = true: the call waits for the GPUs, fills the handle's host fields (num_recv_tokens,
//   num_expanded_tokens, num_recv_tokens_per_expert_list = aligned counts) and raises input errors at once.
//   cpu_sync = false: no host round trip (CUDA-graph capturable); counts stay on the device (handle.device_counts:
//   [0] num_recv_tokens, [1] num_expanded_tokens) and errors are raised by EpBuffer::synchronize().
// - Input errors the device finds while counting (expert id outside [-1, E), duplicate expert in a token) make that
//   rank send nothing; the host raises symmoe::Error naming rank, token, lane and value. Host checks (shapes,
//   T > T_max, H alignment, E % R, null pointers, alignment range) throw before anything is launched.
// - deterministic: the GPU order always equals the golden model's (slots are token-order scans), so the flag is
//   honoured in both settings; it is kept for API compatibility.
// - Combine does not weight (docs/design.md §2.2). Biases start the fp32 sum (bias_0 + bias_1, then the rows in
//   ascending lane order, one bf16 rounding: DeepEP V2's order). Backward duality: dispatch's backward is combine with
//   the same handle (gradients of recv_x summed back per token); combine's backward is a cached dispatch of the
//   gradient.
// NOTES: the first dispatch in expand mode (or with a larger expert_alignment) allocates the expand outputs; do it
// once outside CUDA-graph capture.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "symmoe/runtime.hpp"

namespace symmoe {

enum class EpDtype : int { kBf16 = 0, kFp8E4m3 = 1 };
enum class EpScales : int { kNone = 0, kFp32Per128 = 1, kUe8m0Per32 = 2, kUe8m0Per128 = 3 };
const char* ep_scales_name(EpScales s);
// Bytes of one scale row (0 for kNone). Throws if hidden does not divide into the scale blocks.
int ep_scale_row_bytes(EpScales scales, int hidden);

struct EpBufferConfig {
  int num_max_tokens_per_rank = 0;  // T_max (same on every rank)
  int hidden = 0;                   // H, multiple of 128
  int num_topk = 0;                 // K in [1, 32]
  int num_experts = 0;              // E, multiple of R
  EpDtype dtype = EpDtype::kBf16;
  EpScales scales = EpScales::kNone;   // kNone iff dtype == kBf16
  void validate(int num_ranks) const;  // throws symmoe::Error naming the bad field
};

struct EpDispatchOptions {
  int expert_alignment = 1;  // aligned per-expert counts and expand segment starts, in [1, 1024]
  bool expand = false;       // one row per (token, local expert) instead of per (token, rank)
  bool zero_padding = true;  // expand: zero the padding rows' x and scales (else unspecified)
  bool cached = false;       // reuse the handles of a previous dispatch with the same topk_idx (no counting)
  int num_sms = 0;           // CTAs per rank (0: the plan's choice), clamped to the rank's SM share
  bool cpu_sync = true;
  bool deterministic = true;
};

struct EpDispatchArgs {
  int num_tokens = 0;
  const void* x = nullptr;
  const void* x_scales = nullptr;
  const int64_t* topk_idx = nullptr;
  const float* topk_weights = nullptr;
  cudaStream_t stream = nullptr;  // nullptr: the Communicator's stream of the rank
  // Optional outputs OWNED BY THE CALLER (device; x rows 16-byte aligned), each with room for out_rows >=
  // EpBuffer::row_capacity(expand, alignment) rows: the dispatch writes recv_x / recv_scales / recv_topk_idx /
  // recv_topk_weights there instead of into the EpBuffer's memory (non-expand x and scales: row_capacity rows are
  // copied out of the symmetric buffer on the stream). Null members stay in the EpBuffer's memory.
  void* recv_x_out = nullptr;
  void* recv_scales_out = nullptr;
  int64_t* recv_topk_idx_out = nullptr;
  float* recv_topk_weights_out = nullptr;
  int out_rows = 0;
};

class EpHandle {
 public:
  EpHandle();
  EpHandle(EpHandle&&) noexcept;
  EpHandle& operator=(EpHandle&&) noexcept;
  ~EpHandle();

  // control fields
  int rank = -1, num_ranks = 0;
  bool do_expand = false;
  int num_experts = 0, num_topk = 0, expert_alignment = 1, num_max_tokens_per_rank = 0;
  int num_tokens = 0;        // T of this rank as a source
  int num_recv_tokens = -1;  // host copies (cpu_sync); -1 until known
  int num_expanded_tokens = -1;
  std::vector<int32_t> num_recv_tokens_per_expert_list;  // [El] aligned counts (cpu_sync host list)

  // device metadata (owned). Source side [this rank as sender]:
  int32_t* num_tokens_per_rank = nullptr;    // [R]
  int32_t* num_tokens_per_expert = nullptr;  // [E]
  int32_t* dst_buffer_slot_idx = nullptr;    // [T_max, K] (rows >= num_tokens unspecified)
  int64_t* topk_idx = nullptr;               // [T_max, K] copy of the routing
  // destination side (DeepEP's psum_num_recv_tokens_per_scaleup_rank):
  int32_t* psum_num_recv_tokens_per_rank = nullptr;         // [R] inclusive
  int32_t* num_unaligned_recv_tokens_per_expert = nullptr;  // [El]
  int32_t* psum_num_recv_tokens_per_expert = nullptr;       // [El] (mode-dependent, see reference/dispatch.hpp)
  int32_t* num_recv_tokens_per_expert = nullptr;            // [El] aligned counts
  int32_t* recv_src_metadata = nullptr;                     // [R*T_max, 2+K]
  // [3]: num_recv_tokens, num_expanded_tokens, and 1 when this rank's routing was bad in the dispatch that filled
  // the handle (it sent nothing; a combine with this handle then leaves combined_x / combined_topk_weights unwritten)
  int32_t* device_counts = nullptr;

  int device = -1;
  int num_local_experts() const { return num_experts / num_ranks; }

 private:
  friend class EpBuffer;
  struct Storage;
  std::unique_ptr<Storage> storage_;
};

struct EpDispatchResult {
  void* recv_x = nullptr;
  void* recv_scales = nullptr;
  int64_t* recv_topk_idx = nullptr;
  float* recv_topk_weights = nullptr;
  int num_rows = -1;  // cpu_sync: num_recv_tokens (non-expand) or num_expanded_tokens (expand); else -1
  int row_capacity = 0;
};

struct EpCombineOptions {
  bool reduce_local_experts = false;  // expand only: each rank sums its lanes in fp32, rounds once to bf16
  int num_sms = 0;
  bool cpu_sync = true;
};

struct EpCombineArgs {
  const uint16_t* x = nullptr;          // bf16 rows shaped like recv_x of the handle's dispatch
  const float* topk_weights = nullptr;  // optional, shaped like recv_topk_weights
  const uint16_t* bias_0 = nullptr;     // optional bf16 [T, H] (this rank as source); the sum starts from them
  const uint16_t* bias_1 = nullptr;
  cudaStream_t stream = nullptr;
  // Optional outputs OWNED BY THE CALLER (device, 16-byte aligned): combine writes combined_x [T, H] bf16 (and
  // combined_topk_weights [T, K] fp32 when topk_weights is given) there instead of into the EpBuffer's memory.
  uint16_t* combined_x_out = nullptr;
  float* combined_topk_weights_out = nullptr;
};

struct EpCombineResult {
  uint16_t* combined_x = nullptr;          // bf16 [T, H]
  float* combined_topk_weights = nullptr;  // [T, K]; null when no topk_weights were given
};

// Host checks shared by EpBuffer and the host tests (no GPU needed). Throw symmoe::Error naming rank and field.
void check_dispatch_args(const EpBufferConfig& config, int num_ranks, int rank, const EpDispatchArgs& args,
                         const EpDispatchOptions& options);
void check_combine_args(const EpBufferConfig& config, int rank, const EpHandle& handle, const EpCombineArgs& args,
                        const EpCombineOptions& options);

class EpBuffer {
 public:
  EpBuffer(Communicator& comm, const EpBufferConfig& config);
  ~EpBuffer();
  EpBuffer(const EpBuffer&) = delete;
  EpBuffer& operator=(const EpBuffer&) = delete;

  const EpBufferConfig& config() const { return config_; }
  int scale_row_bytes() const;
  int x_row_bytes() const;
  // Rows of every dispatch output (the worst case, so no call overflows): non-expand R * T_max; expand
  // R * T_max * min(K, El) + El * (expert_alignment - 1).
  int row_capacity(bool expand, int expert_alignment) const;

  // handles.size() == args.size() == number of local ranks. Fresh: handles are (re)filled; cached: read.
  std::vector<EpDispatchResult> dispatch(const std::vector<EpDispatchArgs>& args, const EpDispatchOptions& options,
                                         std::vector<EpHandle>& handles);
  std::vector<EpCombineResult> combine(const std::vector<EpCombineArgs>& args, const EpCombineOptions& options,
                                       const std::vector<EpHandle>& handles);
  // Waits for every local rank, then raises device-detected input errors and peer timeouts.
  void synchronize();
  // CTAs one call uses on `rank` (after clamping), for benchmarks.
  int num_ctas(int rank, int requested_sms) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  EpBufferConfig config_;
};

}  // namespace symmoe
