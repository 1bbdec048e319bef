// L1 weight transform (interleave gate/up rows by 8, pair the block scales); layout in weight_transform.hpp.
#include "symmoe/weight_transform.hpp"

#include <cstring>

#include "symmoe/common.hpp"

namespace symmoe::gemm {

void transform_l1_weights(const uint8_t* data, const float* scales, int num_experts, int inter, int k,
                          uint8_t* out_data, float* out_scales) {
  SYMMOE_CHECK(num_experts > 0, "gemm", "transform_l1_weights: num_experts must be > 0, got ", num_experts);
  SYMMOE_CHECK(inter > 0 && inter % 128 == 0, "gemm",
               "transform_l1_weights: inter must be a positive multiple of 128, got ", inter);
  SYMMOE_CHECK(k > 0 && k % 128 == 0, "gemm", "transform_l1_weights: k must be a positive multiple of 128, got ", k);
  SYMMOE_CHECK(data && scales && out_data && out_scales, "gemm", "transform_l1_weights: null pointer argument");
  const size_t rows = 2 * size_t(inter), kb = k / 128, tiles = inter / 128;
  for (int e = 0; e < num_experts; ++e) {
    const uint8_t* src = data + e * rows * k;
    uint8_t* dst = out_data + e * rows * k;
    for (size_t r = 0; r < rows; ++r) std::memcpy(dst + r * k, src + size_t(l1_original_row(int(r), inter)) * k, k);
    const float* s = scales + e * (rows / 128) * kb;
    float* o = out_scales + e * tiles * kb * 2;
    for (size_t t = 0; t < tiles; ++t)
      for (size_t b = 0; b < kb; ++b) {
        o[(t * kb + b) * 2 + 0] = s[t * kb + b];
        o[(t * kb + b) * 2 + 1] = s[(tiles + t) * kb + b];
      }
  }
}

}  // namespace symmoe::gemm
