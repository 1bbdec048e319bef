// Portable random draws for the golden model and its tests: only the raw std::mt19937_64 stream (which the standard
// fixes bit for bit) is used; the std:: distributions are implementation-defined and would make "same seed, same
// data" depend on the standard library.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace symmoe::ref::rnd {

// Uniform in [0, 1) with 53 random bits.
inline double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

// Standard normal (Box-Muller, one value per call).
inline double standard_normal(std::mt19937_64& rng) {
  const double u1 = 1.0 - uniform01(rng), u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// n weights uniform in [-a, a) with a = sqrt(3) * stddev (the normal's variance). NOTES: weights are the bulk of the
// random data (44M values per v3 expert); this costs ~1 ns a value where Box-Muller costs ~15.
inline std::vector<float> uniform_weights(size_t n, double stddev, std::mt19937_64& rng) {
  std::vector<float> v(n);
  const float a = float(std::sqrt(3.0) * stddev), step = 2.f * a * 0x1.0p-24f;
  for (auto& x : v) x = float(rng() >> 40) * step - a;
  return v;
}

// Uniform integer in [0, n) (modulo bias is irrelevant for test data).
inline int uniform_below(std::mt19937_64& rng, int n) { return int(rng() % uint64_t(n)); }

// A seed mixed from a base seed and a stream id (rank, expert, ...), so streams do not overlap in practice.
inline uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace symmoe::ref::rnd
