// Golden FP8 x FP4 GEMMs and expert MLP. See include/symmoe/reference/fp4.hpp.
#include "symmoe/reference/fp4.hpp"

#include <cmath>
#include <random>
#include <string>

#include "reference/random.hpp"
#include "symmoe/common.hpp"
#include "symmoe/reference/gemm.hpp"

namespace symmoe::ref {
ExpertWeightsFp4 make_random_expert_fp4(int hidden, int intermediate, int expert, uint64_t seed) {
  std::mt19937_64 rng(rnd::mix_seed(seed, 0x30000ull + uint64_t(expert)));
  const auto w1 = rnd::uniform_weights(size_t(2) * intermediate * hidden, 1.0 / std::sqrt(double(hidden)), rng);
  const auto w2 = rnd::uniform_weights(size_t(hidden) * intermediate, 1.0 / std::sqrt(double(intermediate)), rng);
  return {quantize_weights_fp4(w1.data(), 2 * intermediate, hidden),
          quantize_weights_fp4(w2.data(), hidden, intermediate)};
}

ExpertWeights fold_expert_fp4(const ExpertWeightsFp4& w) {
  return {fold_fp4_weights(w.w1, "w1"), fold_fp4_weights(w.w2, "w2")};
}

ExpertWeightMapFp4 make_random_experts_fp4(int hidden, int intermediate, const std::vector<Routing>& routings,
                                           uint64_t seed) {
  ExpertWeightMapFp4 map;
  for (const auto& r : routings)
    for (const int64_t e : r.topk_idx)
      if (e >= 0 && !map.count(int(e))) map[int(e)] = make_random_expert_fp4(hidden, intermediate, int(e), seed);
  return map;
}

ExpertWeightMap fold_experts_fp4(const ExpertWeightMapFp4& w) {
  ExpertWeightMap out;
  for (const auto& [e, weights] : w) {
    const std::string name = "expert " + std::to_string(e);
    out[e] = {fold_fp4_weights(weights.w1, name + " w1"), fold_fp4_weights(weights.w2, name + " w2")};
  }
  return out;
}

std::vector<double> gemm_exact(const Fp8Activations& a, const Fp4Weights& b) {
  const int M = a.num_rows, N = b.num_rows, K = a.num_cols;
  SYMMOE_CHECK(K == b.num_cols, "ref", "gemm_exact (fp4): K mismatch, A has ", K, " columns, B has ", b.num_cols);
  SYMMOE_CHECK(
      K > 0 && K % 32 == 0 && b.data.size() == size_t(N) * K / 2 && b.scales_ue8m0.size() == size_t(N) * (K / 32),
      "ref", "gemm_exact (fp4): B must hold [", N, ", ", K / 2, "] bytes and [", N, ", ", K / 32, "] scale codes");
  std::vector<double> d(size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k) {
        const uint8_t byte = b.data[(size_t(n) * K + k) / 2];
        const double bv = double(fmt::e2m1_to_float((k & 1) ? uint8_t(byte >> 4) : uint8_t(byte & 0xF))) *
                          double(fmt::ue8m0_to_float(b.scales_ue8m0[size_t(n) * (K / 32) + k / 32]));
        const double av = double(fmt::e4m3_to_float(a.data[size_t(m) * K + k])) * double(a.scale(m, k));
        acc += av * bv;
      }
      d[size_t(m) * N + n] = acc;
    }
  return d;
}

std::vector<float> gemm_faithful(const Fp8Activations& a, const Fp4Weights& b) {
  return gemm_faithful(a, fold_fp4_weights(b, "B"));
}

std::vector<uint16_t> expert_mlp_faithful(const Fp8Activations& x, int row_begin, int row_end,
                                          const ExpertWeightsFp4& w, const std::vector<float>& row_weight,
                                          float clamp) {
  return expert_mlp_faithful(x, row_begin, row_end, fold_expert_fp4(w), row_weight, clamp);
}

std::vector<double> expert_mlp_exact(const Fp8Activations& x, int row_begin, int row_end, const ExpertWeightsFp4& w,
                                     const std::vector<double>& row_weight, double clamp) {
  return expert_mlp_exact(x, row_begin, row_end, fold_expert_fp4(w), row_weight, clamp);
}

}  // namespace symmoe::ref
