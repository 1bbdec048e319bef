// The deployment sweep shared by the planner and layout property tests: every named shape x every rank count in
// 1..72 that divides E x sampled token counts in 1..32768 (powers of two, their neighbours, odd values).
#pragma once

#include <string>
#include <vector>

#include "symmoe/shape.hpp"

namespace symmoe::test {

inline const std::vector<std::string>& sweep_shape_names() {
  static const std::vector<std::string> names = {"flash", "pro", "v3", "tiny"};
  return names;
}

// Ascending, so "monotone in tokens" can walk it.
inline const std::vector<int>& sweep_tokens() {
  static const std::vector<int> tokens = {1,    2,    3,    5,     7,     8,     9,     15,   16,   17,   31,
                                          32,   33,   63,   64,    100,   127,   128,   129,  255,  256,  257,
                                          511,  512,  777,  1000,  1023,  1024,  2047,  2048, 3001, 4095, 4096,
                                          4097, 8191, 8192, 12345, 16384, 24577, 32767, 32768};
  return tokens;
}

// Rank counts 1..72 that divide the shape's expert count.
inline std::vector<int> sweep_ranks(const std::string& shape_name) {
  const MoeShape s = named_shape(shape_name, 1, 1);
  std::vector<int> ranks;
  for (int r = 1; r <= 72; ++r)
    if (s.num_experts % r == 0) ranks.push_back(r);
  return ranks;
}

// Every valid (shape, R, T) of the sweep.
template <typename F>
void for_each_deployment(F&& f) {
  for (const auto& name : sweep_shape_names())
    for (const int r : sweep_ranks(name))
      for (const int t : sweep_tokens()) f(name, named_shape(name, r, t));
}

}  // namespace symmoe::test
