// Input checks of the flat EP models, shared with the hybrid model so both reject bad input with the same messages
// (rank, token, lane, value, expected vs got) before producing anything.
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

}  // namespace symmoe::ref
