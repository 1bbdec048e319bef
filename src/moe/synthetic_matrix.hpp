// What the host generators of synthetic expert weights share (include/symmoe/moe_weights.hpp: the FP8 generator in
// moe_weights.cpp, the FP4 one in weight_store_fp4.cpp): the matrix record and the expert's two matrices.
#pragma once

#include <cstddef>

#include "symmoe/common.hpp"
#include "symmoe/moe_weights.hpp"

namespace symmoe::synthetic {

// A host matrix [rows, cols] (Fp8BlockWeights or Fp4Weights) with data_bytes of codes, all zero; scales unsized.
template <typename Weights>
Weights sized_matrix(int rows, int cols, size_t data_bytes) {
  Weights w;
  w.num_rows = rows, w.num_cols = cols;
  w.data.resize(data_bytes);
  return w;
}

// One expert: W1 [2I, H] (fan-in H) and W2 [H, I] (fan-in I), each from make(rows, cols, matrix, fan_in). `what`
// names the weights in the error for H or I not a multiple of 128.
template <typename Expert, typename Make>
Expert host_expert_matrices(int hidden, int intermediate, const char* what, Make&& make) {
  SYMMOE_CHECK(hidden % 128 == 0 && intermediate % 128 == 0, "moe", what,
               " need H and I multiples of 128, got H=", hidden, " I=", intermediate);
  return {make(2 * intermediate, hidden, kW1, hidden), make(hidden, intermediate, kW2, intermediate)};
}

}  // namespace symmoe::synthetic
