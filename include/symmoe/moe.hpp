// The composed MoE layer on the GPUs: the baseline the fused kernel is measured against
// and the fallback where it does not apply. Per local rank, on the rank's stream, with no host synchronisation:
//   EP dispatch (expand, FP8 x + fp32 per-128 scales)            -> one row per (token, local expert), segments
//   glue: segment starts + activation scales row-major -> K-block-major   (src/kernels/moe/expand_glue.cu)
//   grouped GEMM L1 + SwiGLU + top-k weight + FP8 re-quantisation (UE8M0 per 128)
//   grouped GEMM L2 -> bf16 rows
//   EP combine (expand, unweighted, fp32 sum in ascending top-k order, one bf16 rounding) -> y
// i.e. docs/design.md §2.3: y[t] = bf16(sum_k bf16(W2[e] . Q8(w[t,k] * SwiGLU(W1[e] . x[t])))), the function of
// ref::moe_forward_faithful / ref::moe_forward_composed (the golden model), up to the GEMM's accumulation order.
//
// Contract:
// - Construction is collective (all ranks of the Communicator, same shape and options) and allocates everything
//   (EP buffer, expand outputs sized for the worst case R*T_max*min(K, El) + El*(alignment-1) rows, GEMM
//   intermediates), so forward() allocates nothing and is CUDA-graph capturable from the first call.
// - Weights: one MoeRankWeights per local rank (Communicator::local_ranks() order), device memory on the rank's
//   device, L1 ALREADY TRANSFORMED (gemm::transform_l1_weights layout; MoeWeightStore produces it). Not owned:
//   they must outlive the layer and stay unchanged while a forward runs. FP8 or FP4 (MoeRankWeights::format,
//   layouts in symmoe/weight_store.hpp): both grouped GEMMs run the weights' format; with FP4 weights y is bitwise
//   the layer's y on the FP8 weights gemm::expand_l{1,2}_fp4 make of them (tests/gpu/test_moe_fp4.cu).
// - forward(args): one MoeForwardArgs (symmoe/moe_args.hpp) per local rank; every rank must call it (collective).
//     x            device e4m3 [T, H] (T = num_tokens <= T_max), rows contiguous
//     x_scales     device fp32 [T, H/128] (one scale per token per 128 channels; UE8M0-valued scales accepted)
//     topk_idx     device int64 [T, K], global expert id or -1 (masked lane); experts distinct within a token
//     topk_weights device fp32 [T, K] (the weight multiplies the L1 output BEFORE the FP8 re-quantisation)
//     y            optional device bf16 [T, H]: the result is copied there (stream-ordered); else the result
//                  lives in the layer's buffer, valid until the next forward/combine.
//   Returns per rank the pointer to y. All work is enqueued on args.stream (nullptr: Communicator::stream(rank));
//   inputs must stay valid until it completes. A token whose lanes are all -1 gets zeros.
// - Errors: host checks (shapes, null pointers, T > T_max) throw symmoe::Error before anything is launched;
//   device-detected routing errors (bad expert id, duplicates) and peer timeouts are raised by synchronize()
//   (it waits for the Communicator's streams; a caller passing its own streams synchronises them first).
// - stage_*(): the four stages of forward() on their own (benchmarks time them; each is repeatable on the data the
//   previous stage left): dispatch, experts_l1 (glue + L1), experts_l2, combine.
// NOTES: the expand layout is padded per expert to `expert_alignment` rows; the GEMMs compute only the experts'
// valid rows (device counts), so the padding costs no FLOPs, only capacity. Numerics vs the golden model: the same
// function bit for bit (ref::gemm_faithful models WGMMA's FP8 accumulation exactly) except expf in the SwiGLU, so y
// is bitwise equal except on tokens with an L1 FP8 code at a rounding boundary
// (include/symmoe/reference/tolerance.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "symmoe/moe_args.hpp"
#include "symmoe/runtime.hpp"
#include "symmoe/shape.hpp"
#include "symmoe/weight_store.hpp"

namespace symmoe {

struct ComposedMoeOptions {
  int expert_alignment = 128;  // expand segment alignment, [1, 1024]
  float clamp = 0.f;           // SwiGLU clamp (MegaMoeOptions::clamp's meaning: <= 0 off, not DeepGEMM's 0)
  int ep_sms = 0;              // CTAs of dispatch and combine per rank (0: the EP plan)
  int gemm_sms = 0;            // persistent CTAs of each GEMM (0: every SM of the rank's device)
};

// Host check of the options (no GPU needed); throws symmoe::Error naming the field.
void check_options(const ComposedMoeOptions& options);

class ComposedMoe {
 public:
  ComposedMoe(Communicator& comm, const MoeShape& shape, const std::vector<MoeRankWeights>& weights,
              const ComposedMoeOptions& options = {});
  ~ComposedMoe();
  ComposedMoe(const ComposedMoe&) = delete;
  ComposedMoe& operator=(const ComposedMoe&) = delete;

  const MoeShape& shape() const { return shape_; }
  const ComposedMoeOptions& options() const { return options_; }

  std::vector<const uint16_t*> forward(const std::vector<MoeForwardArgs>& args);
  void synchronize();  // waits for every local rank; raises device-detected input errors and peer timeouts

  // The stages of forward(), in order (same args for each).
  void stage_dispatch(const std::vector<MoeForwardArgs>& args);
  void stage_experts_l1(const std::vector<MoeForwardArgs>& args);
  void stage_experts_l2(const std::vector<MoeForwardArgs>& args);
  std::vector<const uint16_t*> stage_combine(const std::vector<MoeForwardArgs>& args);

  // Rows of the expand layout per rank (worst case), for benchmarks' byte counts.
  int row_capacity() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  MoeShape shape_;
  ComposedMoeOptions options_;
};

}  // namespace symmoe
