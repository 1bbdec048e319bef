// The fused MoE layer (MegaMoE, docs/design.md §2.3, §8): one persistent kernel per rank and call that pulls
// tokens (dispatch), runs the L1 GEMM + SwiGLU + top-k weight + FP8 re-quantisation, the L2 GEMM, writes the L2
// rows back to the tokens' ranks and combines them.
//
// Contract:
// - Construction is collective (all ranks of the Communicator, same shape and options): plans the kernel per local
//   rank (plan::plan_mega_moe with the rank's SM share), allocates the symmetric workspace (layout::MegaLayout,
//   zero-filled: every counter starts at 0 and every call leaves it at 0) and builds the TMA descriptors. forward()
//   allocates nothing and is CUDA-graph capturable.
// - Weights: MoeRankWeights per local rank (symmoe/weight_store.hpp), L1 ALREADY TRANSFORMED; not owned, must
//   outlive the layer (or the next bind_weights). Given to the constructor or bound later with bind_weights().
//   FP8 or FP4 (format kFp4: E2M1 + UE8M0 codes + base scales, symmoe/weight_store.hpp): the FP4 kernel upconverts
//   the weights to E4M3 in shared memory, so a layer on FP4 weights computes what it computes on the FP8 weights
//   gemm::expand_l{1,2}_fp4 make of them, and what ComposedMoe computes on the same FP4 weights, bit for bit.
//   Binding weights of another format re-plans the layer (plan() then describes that format's kernel).
// - Inputs live in the symmetric workspace (peers pull from there). Either fill them in place through input(i)
//   (x e4m3 [T, H] rows H apart; x_scales fp32 rows x_scales_stride floats apart; topk_idx int64 [T, K];
//   topk_weights fp32 [T, K]) and pass those pointers in MoeForwardArgs, or pass your own device arrays
//   (symmoe/moe_args.hpp) and forward() copies them in on the rank's stream first.
// - forward(args): collective; one MoeForwardArgs per local rank (Communicator::local_ranks() order). y: bf16
//   [T, H]; null: the layer's own buffer (valid until the next forward). Returns the y pointers. Activation clamp
//   and per-expert received counts come from MegaMoeOptions.
// - Semantics: y[t] = bf16(sum_{k routed, ascending} bf16(W2[e] . Q8(w[t,k] * SwiGLU(W1[e] . x[t])))), zeros for
//   an all-masked token: the composed path's function, bitwise (same GEMM core, epilogues and combine order; see
//   tests/gpu/test_mega.cu).
// - Bad routing (an expert id outside [-1, E), or an expert repeated within a token) is found on the device: that
//   rank's tokens are not computed (no peer receives them), its y is not written, the other ranks' outputs are
//   complete, and synchronize() raises the error EpBuffer raises for the same input ("dispatch rank R token T lane
//   L: ..."), naming the first bad entry (smallest token, then lane).
// - Errors: host checks throw symmoe::Error before anything is launched; a timed-out device wait (a stalled peer:
//   site "barrier"; a local protocol bug: "mega_l1_arrival" / "mega_l2_mask" / "grid_sync") is raised by
//   synchronize() as PeerTimeout. After one, the workspace's sync state is stale: destroy the layer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "symmoe/moe_args.hpp"
#include "symmoe/plan.hpp"
#include "symmoe/runtime.hpp"
#include "symmoe/shape.hpp"
#include "symmoe/weight_store.hpp"

namespace symmoe {

struct MegaMoeOptions {
  float clamp = 0.f;            // SwiGLU clamp of swiglu_weighted (<= 0: off); DeepGEMM's activation_clamp, whose 0
                                // clamps to 0, converts with swiglu_clamp_for_activation_clamp (activation_clamp.hpp)
  int num_sms = 0;              // persistent CTAs per rank (0: the rank's SM share, placement().num_sms)
  bool count_received = false;  // received_counts() valid after each forward
};

// Where a rank's inputs live in the workspace (device pointers, rank's device).
struct MegaInputView {
  uint8_t* x = nullptr;           // e4m3 [T_max, H]
  float* x_scales = nullptr;      // fp32 [T_max, x_scales_stride] (first H/128 floats of each row used)
  int x_scales_stride = 0;        // floats between rows
  int64_t* topk_idx = nullptr;    // [T_max, K]
  float* topk_weights = nullptr;  // [T_max, K]
};

class MegaMoe {
 public:
  MegaMoe(Communicator& comm, const MoeShape& shape, const std::vector<MoeRankWeights>& weights,
          const MegaMoeOptions& options = {});
  // Without weights: bind_weights() must run before the first forward() (DeepGEMM-style callers pass weights per
  // call; the Python fp8_mega_moe binds when their pointers change).
  MegaMoe(Communicator& comm, const MoeShape& shape, const MegaMoeOptions& options);
  // One MoeRankWeights per local rank (same contract as the constructor's). Host only and cheap (rebuilds the TMA
  // descriptors); not collective; must not run while a forward() that reads the old weights is being captured.
  void bind_weights(const std::vector<MoeRankWeights>& weights);
  // SwiGLU clamp of the following forward() calls (options().clamp's meaning); host only, like options().clamp at
  // construction.
  void set_clamp(float clamp) { options_.clamp = clamp; }
  ~MegaMoe();
  MegaMoe(const MegaMoe&) = delete;
  MegaMoe& operator=(const MegaMoe&) = delete;

  const MoeShape& shape() const { return shape_; }
  const MegaMoeOptions& options() const { return options_; }
  const plan::MegaPlan& plan(size_t local_index = 0) const;  // for T_max tokens per rank; printable: to_string()
  // The plan forward() uses for a call with num_tokens tokens on this rank (BLOCK_M and experts per wave follow the
  // batch; workspace and layout are the T_max plan's). Cached per num_tokens; host only.
  const plan::MegaPlan& plan_for_tokens(size_t local_index, int num_tokens);
  MegaInputView input(size_t local_index) const;

  std::vector<const uint16_t*> forward(const std::vector<MoeForwardArgs>& args);
  void synchronize();  // waits for every local rank; raises peer timeouts, then bad routing

  // [El] int32 on the rank's device: (token, expert) pairs received per local expert by the last forward
  // (options.count_received); nullptr otherwise.
  const int32_t* received_counts(size_t local_index) const;

  // Stage timeline of the following forward() calls, for benchmarks; trace(i) downloads the last call's
  // [num_sms][kTraceWordsPerCta] values of local rank i (after synchronize()). The words' format is the kernel's,
  // internal (src/kernels/mega/trace_format.hpp; `symmoe bench moe --trace` prints it).
  void set_trace(bool on);
  std::vector<unsigned long long> trace(size_t local_index) const;

 private:
  friend struct MegaTestAccess;  // tests/gpu/test_mega.cu's planted stall only (src/mega/test_access.hpp)
  struct Impl;
  std::unique_ptr<Impl> impl_;
  MoeShape shape_;
  MegaMoeOptions options_;
};

}  // namespace symmoe
