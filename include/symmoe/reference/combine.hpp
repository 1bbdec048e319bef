// Golden model of EP combine (docs/design.md §2.2): all R ranks in one call, driven by the dispatch handles only.
//
// Inputs on each rank d (as the destination of the dispatch):
//   x             bf16 rows shaped like dispatch's recv_x: non-expand [num_recv_tokens, H], expand [num_expanded, H]
//   topk_weights  optional, shaped like recv_topk_weights (non-expand [num_recv, K], expand [num_expanded])
// and on each source rank s: optional bias_0, bias_1 bf16 [T_s, H].
// Output on source s, token t:
//   combined_x[t] = bf16_rne( acc ), acc an fp32 accumulator that starts at 0.f, adds bias_0 then bias_1 (each
//   element converted to fp32; DeepEP V2's order: the sum starts from the biases), then adds, in ASCENDING lane
//   order k over lanes that are not -1:
//     non-expand: the row rank d returns for the token, at d's master lane only (one row per destination rank);
//     expand:     the expanded row of lane k (one row per lane) - exactly docs/design.md §2.3's sum;
//     expand + reduce_local_experts: rank d first sums its own lanes of the token in ascending k in fp32 and rounds
//                 that partial ONCE to bf16 (halving traffic); the source adds the partial at d's master lane;
//   then rounds once to bf16.
//   Combine does NOT weight. A token with all lanes -1 gets the bias terms only (zeros without biases).
//   combined_topk_weights[t, j] = the weight for lane j returned by the rank owning lane j's expert (non-expand:
//   column j of that rank's row; expand: the expanded row's weight), 0 for -1 lanes. Empty when no weights given.
// Bad input (row counts, hidden size, bias shapes) raises symmoe::Error naming the rank before any output.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "symmoe/reference/dispatch.hpp"

namespace symmoe::ref {

struct CombineInput {
  std::vector<uint16_t> x;                         // bf16 rows shaped like recv_x (see above)
  std::optional<std::vector<float>> topk_weights;  // shaped like recv_topk_weights; given on all ranks or none
  std::optional<std::vector<uint16_t>> bias_0;     // bf16 [T_s, H] of this rank as a source
  std::optional<std::vector<uint16_t>> bias_1;
};

struct CombineOptions {
  bool reduce_local_experts = false;  // expand only: per-rank fp32 partial rounded once to bf16
};

struct CombineOutput {
  std::vector<uint16_t> combined_x;          // bf16 [T_s, H]
  std::vector<float> combined_topk_weights;  // [T_s, K]; empty when no topk_weights were given
};

// handles[r] from dispatch (any of its modes); inputs[r] on rank r. Returns outputs[s] per source rank.
std::vector<CombineOutput> combine(const std::vector<EpHandle>& handles, int hidden,
                                   const std::vector<CombineInput>& inputs, const CombineOptions& options = {});

}  // namespace symmoe::ref
