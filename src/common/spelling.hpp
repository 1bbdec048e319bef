// "Did you mean" hints for misspelt names (CLI flags, SYMMOE_* environment knobs).
#pragma once

#include <string>
#include <vector>

namespace symmoe::detail {

// The first candidate that `word` abbreviates (3 letters or more), else the candidate closest to `word` by edit
// distance (insertions, deletions, substitutions, adjacent swaps), or "" when none is close: at most
// max(1, |word| / 3) edits. Ties go to the first candidate.
std::string closest_word(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace symmoe::detail
