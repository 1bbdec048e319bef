// Test helpers shared by tests/cpu and tests/gpu: bitwise comparison with a first-mismatch report, and the
// relative Frobenius error used for FP8 arithmetic.
#pragma once

#include <gtest/gtest.h>

#include "symmoe/common.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace symmoe::test {

// Bitwise equality of two arrays; on failure names the first differing index, expected and got, and the count.
template <typename T>
::testing::AssertionResult bitwise_equal(const T* expected, const T* got, size_t n, const std::string& what = "") {
  size_t first = n, num_bad = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&expected[i], &got[i], sizeof(T)) != 0) {
      if (first == n) first = i;
      ++num_bad;
    }
  }
  if (num_bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << what << ": " << num_bad << " of " << n << " differ; first at index " << first << ": expected ";
  if constexpr (std::is_integral_v<T> && sizeof(T) == 1)
    os << int(expected[first]) << " got " << int(got[first]);
  else
    os << expected[first] << " got " << got[first];
  return ::testing::AssertionFailure() << os.str();
}

template <typename T>
::testing::AssertionResult bitwise_equal(const std::vector<T>& expected, const std::vector<T>& got,
                                         const std::string& what = "") {
  if (expected.size() != got.size())
    return ::testing::AssertionFailure() << what << ": size expected " << expected.size() << " got " << got.size();
  return bitwise_equal(expected.data(), got.data(), expected.size(), what);
}

// ||got - ref|| / ||ref|| in double; NaN in `got` gives +inf so it never passes a tolerance.
inline double rel_frobenius(const std::vector<double>& ref, const std::vector<double>& got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den == 0 ? (num == 0 ? 0 : INFINITY) : std::sqrt(num / den);
}

// The message of the symmoe::Error that `f` throws, or "" when it throws none (tests then assert on the text:
// which argument, which rank, expected vs got).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace symmoe::test
