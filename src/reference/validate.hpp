// Pieces of the flat EP models that the hybrid model shares: the input checks (both reject bad input with the same
// messages, rank, token, lane, value, expected vs got, before producing anything) and the output allocation.
#pragma once

#include <vector>

#include "symmoe/reference/combine.hpp"
#include "symmoe/reference/dispatch.hpp"

namespace symmoe::ref {

// Throws symmoe::Error on a bad config (ranks, experts, top-k, T_max, alignment) or bad inputs (see dispatch.hpp).
void validate_dispatch_inputs(const DispatchConfig& config, const std::vector<DispatchInput>& inputs);

// Throws symmoe::Error on handles / inputs that do not fit together (see combine.hpp).
void validate_combine_inputs(const std::vector<EpHandle>& handles, int hidden, const std::vector<CombineInput>& inputs,
                             const CombineOptions& options);

// Sizes a destination's output arrays from its handle and fills them: expand padding is 0xFF (NaN in bf16/e4m3,
// "unspecified") unless zero_padding, everything else 0 / -1.
void allocate_outputs(DispatchOutput& out, const EpHandle& handle, size_t x_row_bytes, size_t sf_row_bytes,
                      bool zero_padding);

}  // namespace symmoe::ref
