// One rank's arguments of a MoE layer call, the same for both layers (ComposedMoe, symmoe/moe.hpp; MegaMoe,
// symmoe/mega_moe.hpp), and the host check both layers run on them.
//   num_tokens   T <= T_max (num_max_tokens_per_rank); 0: no pointer is read
//   x            device e4m3 [T, H], rows contiguous, 16-byte aligned
//   x_scales     device fp32 [T, H/128] (one scale per token per 128 channels; UE8M0-valued scales accepted)
//   topk_idx     device int64 [T, K], global expert id or -1 (masked lane); experts distinct within a token
//   topk_weights device fp32 [T, K] (the weight multiplies the L1 output BEFORE the FP8 re-quantisation)
//   y            optional device bf16 [T, H]: the result is written there (stream-ordered); null: the layer's own
//                buffer, valid until its next call
//   stream       the call's stream on the rank's device (nullptr: Communicator::stream(rank))
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "symmoe/shape.hpp"

namespace symmoe {

struct MoeForwardArgs {
  int num_tokens = 0;
  const uint8_t* x = nullptr;
  const float* x_scales = nullptr;
  const int64_t* topk_idx = nullptr;
  const float* topk_weights = nullptr;
  uint16_t* y = nullptr;
  cudaStream_t stream = nullptr;
};

// Host checks of one rank's forward arguments (no GPU needed); throws symmoe::Error naming rank and field.
void check_forward_args(const MoeShape& shape, int rank, const MoeForwardArgs& args);

}  // namespace symmoe
