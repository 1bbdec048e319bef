// DeepGEMM's activation_clamp as the SwiGLU formula's clamp (include/symmoe/activation_clamp.hpp): every value
// behaves as DeepGEMM's (None / +inf: no clamp; c >= 0: gate <= c, up in [-c, c]; 0 included), negative and NaN are
// refused naming DeepGEMM's meaning.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "symmoe/activation_clamp.hpp"
#include "symmoe/reference/mlp.hpp"
#include "symmoe/swiglu.hpp"

namespace symmoe {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// DeepGEMM's clamp, written from its definition: gate' = min(gate, c), up' = min(max(up, -c), c), then the same
// SwiGLU arithmetic as swiglu_weighted.
float deepgemm_swiglu(float gate, float up, float weight, float c) {
  if (c != kInf) {
    gate = std::fmin(gate, c);
    up = std::fmin(std::fmax(up, -c), c);
  }
  const float silu = gate / (1.f + std::exp(-gate));
  return (silu * up) * weight;
}

// Gates, ups and weights from zero and subnormals to overflow, both signs.
std::vector<float> probe_values() {
  const float sub = std::numeric_limits<float>::denorm_min(), low = std::numeric_limits<float>::min(),
              high = std::numeric_limits<float>::max();
  std::vector<float> v = {0.f, -0.f, sub,  -sub,  1e-40f, -1e-40f, low,  1e-20f, 0.5f,  -0.5f,  -1.278f, 1.f,  -1.f,
                          3.f, -3.f, 87.f, -87.f, 89.f,   -89.f,   1e4f, -1e4f,  1e30f, -1e30f, high,    -high};
  for (int i = -60; i <= 60; ++i) v.push_back(std::ldexp(1.37f, i / 2) * (i % 2 ? -1.f : 1.f));
  return v;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(ActivationClamp, MapsDeepGemmValuesToTheFormulasClamp) {
  EXPECT_EQ(swiglu_clamp_for_activation_clamp(kInf), 0.f);  // None: off
  EXPECT_EQ(swiglu_clamp_for_activation_clamp(7.f), 7.f);
  EXPECT_EQ(swiglu_clamp_for_activation_clamp(1e-40f), 1e-40f);
  EXPECT_EQ(swiglu_clamp_for_activation_clamp(0.f), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(swiglu_clamp_for_activation_clamp(-0.f), std::numeric_limits<float>::denorm_min());
}

TEST(ActivationClamp, RefusesNegativeAndNanNamingDeepGemmsMeaning) {
  for (const float bad : {-1.f, -kInf, std::nanf("")}) {
    try {
      swiglu_clamp_for_activation_clamp(bad);
      ADD_FAILURE() << "activation_clamp " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("activation_clamp must be None or >= 0 (DeepGEMM's meaning: None or +inf = "
                                           "no clamp, c >= 0 clamps gate to <= c and up to [-c, c]"),
                std::string::npos)
          << e.what();
    }
  }
}

// Every finite gate, any up and weight: the formula at the converted clamp is DeepGEMM's value, bit for bit for
// c > 0 and +inf, and a zero (either sign) for c = 0 as DeepGEMM's.
TEST(ActivationClamp, FormulaEqualsDeepGemmsAtEveryClamp) {
  const std::vector<float> v = probe_values();
  for (const float c : {0.f, 1e-40f, 0.25f, 1.f, 7.f, 60.f, 1e30f, kInf}) {
    const float k = swiglu_clamp_for_activation_clamp(c);
    for (const float g : v)
      for (const float u : v)
        for (const float w : {0.f, 1e-3f, 0.37f, 1.f}) {
          const float got = swiglu_weighted(g, u, w, k), want = deepgemm_swiglu(g, u, w, c);
          if (c == 0.f) {
            ASSERT_EQ(got, 0.f) << "g " << g << " u " << u << " w " << w;
            ASSERT_EQ(want, 0.f) << "g " << g << " u " << u << " w " << w;
          } else if (!(std::isnan(got) && std::isnan(want))) {
            ASSERT_EQ(bits(got), bits(want)) << "c " << c << " g " << g << " u " << u << " w " << w;
          }
        }
  }
}

// The golden model of the layer at DeepGEMM's activation_clamp 0: y is +0 everywhere (L1 rows of zeros keep a finite
// FP8 scale, L2 and the combine sum zeros).
TEST(ActivationClamp, ZeroClampGivesAZeroLayer) {
  MoeShape s;
  s.hidden = 256, s.intermediate = 256, s.num_experts = 8, s.num_topk = 3, s.num_ranks = 2,
  s.num_max_tokens_per_rank = 6;
  ref::RoutingOptions ro;
  ro.seed = 11;
  std::vector<ref::MoeLayerInput> inputs;
  for (int r = 0; r < s.num_ranks; ++r) inputs.push_back(ref::make_random_layer_input(s, 6, ro, r));
  ref::ExpertWeightMap w;
  for (int e = 0; e < s.num_experts; ++e) w[e] = ref::make_random_expert(s.hidden, s.intermediate, e, 5);
  const auto off = ref::moe_forward_faithful(s, w, inputs, swiglu_clamp_for_activation_clamp(kInf));
  const auto zero = ref::moe_forward_faithful(s, w, inputs, swiglu_clamp_for_activation_clamp(0.f));
  size_t nonzero_off = 0;
  for (size_t r = 0; r < zero.size(); ++r) {
    for (const uint16_t b : off[r]) nonzero_off += b != 0;
    for (size_t i = 0; i < zero[r].size(); ++i) ASSERT_EQ(zero[r][i], 0) << "rank " << r << " value " << i;
  }
  EXPECT_GT(nonzero_off, 0u);  // the inputs do produce values without the clamp
}

}  // namespace
}  // namespace symmoe
