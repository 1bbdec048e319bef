// What the grouped-GEMM GPU tests share (test_gemm.cu: FP8 weights; test_gemm_fp4.cu: FP4 weights): the problem's
// row layout and random activations, the A side in the kernel's layouts, and the check of a bf16 D against the golden
// model. The weights, their device layouts and the tile configurations stay with each test.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <map>
#include <string>
#include <vector>

#include "common/compare.hpp"
#include "gpu/device_array.hpp"
#include "reference/random.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/gemm.hpp"
#include "symmoe/quant.hpp"
#include "symmoe/reference/gemm.hpp"

namespace symmoe::test {

// A grouped problem on the host: all rows of A (padding rows hold random data too), per-expert weights of type
// Weights in their original layout [n, k], the row ranges of each expert.
template <class Weights>
struct GemmProblem {
  gemm::GroupLayout layout = gemm::GroupLayout::kContiguous;
  int num_experts = 0, n = 0, k = 0, num_rows = 0;  // num_rows: M_total (contiguous) or max_m (masked)
  std::vector<int32_t> starts, counts;              // per expert: first row, rows passed to the kernel
  std::vector<int> valid;                           // rows the kernel must compute (counts clamped to max_m)
  Fp8Activations a;
  std::vector<Weights> b;
  int total_rows() const { return layout == gemm::GroupLayout::kMasked ? num_experts * num_rows : num_rows; }
};

// Everything of p but its weights: the experts' rows (contiguous: segments aligned to alignment_or_max_m, with the
// end row appended to starts; masked: max_m = alignment_or_max_m rows per expert, counts clamped to it) and A, every
// row x ~ N(0, 1) * 2^[-4, 4] drawn from rng, quantised per 128 with scale format a_scales.
template <class Weights>
void fill_rows_and_activations(GemmProblem<Weights>& p, gemm::GroupLayout layout, const std::vector<int>& counts,
                               int alignment_or_max_m, int n, int k, fmt::ScaleFormat a_scales, std::mt19937_64& rng) {
  p.layout = layout;
  p.num_experts = int(counts.size());
  p.n = n, p.k = k;
  int row = 0;
  for (int e = 0; e < p.num_experts; ++e) {
    if (layout == gemm::GroupLayout::kMasked) {
      p.starts.push_back(e * alignment_or_max_m);
      p.valid.push_back(std::min(counts[e], alignment_or_max_m));
    } else {
      p.starts.push_back(row);
      p.valid.push_back(counts[e]);
      row += align_up(counts[e], alignment_or_max_m);
    }
    p.counts.push_back(counts[e]);
  }
  if (layout == gemm::GroupLayout::kContiguous) p.starts.push_back(row);
  p.num_rows = layout == gemm::GroupLayout::kMasked ? alignment_or_max_m : row;
  const int total = p.total_rows();
  std::vector<float> x(size_t(total) * k);
  for (int r = 0; r < total; ++r) {
    const float mag = std::exp2(float(ref::rnd::uniform_below(rng, 9) - 4));
    for (int c = 0; c < k; ++c) x[size_t(r) * k + c] = float(ref::rnd::standard_normal(rng)) * mag;
  }
  p.a = quantize_activations(x.data(), total, k, 128, a_scales);
}

// The A side of a problem on the device in the kernel's layouts: codes [total_rows, k], scales MN-major
// [k/128][sfa_stride] (NaN past the rows), segment starts and row counts.
struct DeviceActivations {
  DeviceArray<uint8_t> a;
  DeviceArray<float> sfa;
  DeviceArray<int32_t> starts, counts;
  int sfa_stride;
  template <class Weights>
  explicit DeviceActivations(const GemmProblem<Weights>& p)
      : a(p.a.data),
        sfa(host_sfa(p)),
        starts(p.starts),
        counts(p.counts),
        sfa_stride(gemm::sfa_stride_for(p.total_rows())) {}
  template <class Weights>
  static std::vector<float> host_sfa(const GemmProblem<Weights>& p) {
    const int stride = gemm::sfa_stride_for(p.total_rows()), kb = p.k / 128;
    std::vector<float> s(size_t(kb) * stride, std::nanf(""));
    for (int r = 0; r < p.total_rows(); ++r)
      for (int b = 0; b < kb; ++b) s[size_t(b) * stride + r] = p.a.scales[size_t(r) * kb + b];
    return s;
  }
  // The call's input with everything but the weights (b, sfb, weights, b_scale_codes: the caller's).
  template <class Weights>
  gemm::GroupedGemmInput input(const GemmProblem<Weights>& p) const {
    gemm::GroupedGemmInput in;
    in.layout = p.layout;
    in.num_experts = p.num_experts, in.n = p.n, in.k = p.k, in.num_rows = p.num_rows;
    in.segment_starts = p.layout == gemm::GroupLayout::kContiguous ? starts.ptr : nullptr;
    in.num_valid_rows = counts.ptr;
    in.a = a.ptr, in.sfa = sfa.ptr, in.sfa_stride = sfa_stride;
    return in;
  }
};

// Waits for the kernels launched so far and raises their errors.
inline void sync_kernels() {
  SYMMOE_CUDA_CHECK(cudaGetLastError());
  SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
}

// The golden model's answer for the valid rows of every expert of a problem (expert_weights(e): the FP8 block weights
// the model multiplies for expert e), in expert / row / column order: exact (fp64) and faithful rounded to bf16, and
// which rows of D are valid. Computed once per problem and weights: a test checks many kernel configurations of one
// problem against it (the model is most of a test's time). The cache is keyed by the problem's content (every input
// byte hashed, with the shape), so a new problem never reads another's answer.
struct GemmModelRows {
  std::vector<double> exact, faithful_bf16;
  std::vector<float> faithful;        // fp32 (the L1 epilogue's input)
  std::vector<size_t> expert_offset;  // expert e's first value in exact / faithful / faithful_bf16
  std::vector<char> written;
};

// FNV-1a over 8-byte words (then the tail bytes): a content key, fast next to the model.
inline uint64_t fnv1a(uint64_t h, const void* data, size_t bytes) {
  const auto* b = static_cast<const uint8_t*>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

template <class Weights, class ExpertWeights>
const GemmModelRows& gemm_model_rows(const GemmProblem<Weights>& p, const ExpertWeights& expert_weights) {
  uint64_t key = 14695981039346656037ull;
  const int shape[5] = {int(p.layout), p.num_experts, p.n, p.k, p.num_rows};
  key = fnv1a(key, shape, sizeof(shape));
  key = fnv1a(key, p.starts.data(), p.starts.size() * sizeof(p.starts[0]));
  key = fnv1a(key, p.valid.data(), p.valid.size() * sizeof(p.valid[0]));
  key = fnv1a(key, p.a.data.data(), p.a.data.size());
  key = fnv1a(key, p.a.scales.data(), p.a.scales.size() * sizeof(float));
  for (int e = 0; e < p.num_experts; ++e) {
    if (p.valid[e] == 0) continue;
    const Fp8BlockWeights& w = expert_weights(e);
    key = fnv1a(key, w.data.data(), w.data.size());
    key = fnv1a(key, w.scales.data(), w.scales.size() * sizeof(float));
  }
  static std::map<uint64_t, GemmModelRows> cache;
  const auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 8) cache.clear();  // a test's problems; bounded
  GemmModelRows m;
  m.written.assign(p.total_rows(), 0);
  for (int e = 0; e < p.num_experts; ++e) {
    const int r0 = p.starts[e], rows = p.valid[e];
    m.expert_offset.push_back(m.faithful.size());
    if (rows == 0) continue;
    const Fp8BlockWeights& w = expert_weights(e);
    const auto exact = ref::gemm_exact(p.a, r0, r0 + rows, w);
    const auto faithful = ref::gemm_faithful(p.a, r0, r0 + rows, w);
    for (int r = 0; r < rows; ++r) m.written[r0 + r] = 1;
    m.exact.insert(m.exact.end(), exact.begin(), exact.end());
    m.faithful.insert(m.faithful.end(), faithful.begin(), faithful.end());
    for (const float f : faithful) m.faithful_bf16.push_back(fmt::bf16_to_float(fmt::float_to_bf16(f)));
  }
  return cache.emplace(key, std::move(m)).first->second;
}

// Checks a bf16 D [total_rows, n] (downloaded) against the golden model (gemm_model_rows) on every expert's valid
// rows. Tolerances: vs faithful rounded to bf16 <= 1e-3, vs exact <= 2e-3 (relative Frobenius); expect_bitwise: bf16
// D == bf16(ref::gemm_faithful) bit for bit (reported as bitwise_what). Rows outside the valid rows must keep the
// poison (0xFFFF). Prints one line, tagged with label.
template <class Weights, class ExpertWeights>
void check_bf16_against_model(const GemmProblem<Weights>& p, const std::vector<uint16_t>& got,
                              const ExpertWeights& expert_weights, const std::string& label, bool expect_bitwise,
                              const std::string& bitwise_what) {
  const GemmModelRows& model = gemm_model_rows(p, expert_weights);
  std::vector<double> all_got;
  all_got.reserve(model.exact.size());
  for (int e = 0; e < p.num_experts; ++e) {
    const int r0 = p.starts[e], rows = p.valid[e];
    for (int r = 0; r < rows; ++r)
      for (int col = 0; col < p.n; ++col) all_got.push_back(fmt::bf16_to_float(got[size_t(r0 + r) * p.n + col]));
  }
  const double err_faithful = rel_frobenius(model.faithful_bf16, all_got);
  const double err_exact = rel_frobenius(model.exact, all_got);
  std::printf("    [%s] rows %zu: rel err vs faithful %.2e, vs exact %.2e\n", label.c_str(), all_got.size() / p.n,
              err_faithful, err_exact);
  EXPECT_LE(err_faithful, 1e-3);
  EXPECT_LE(err_exact, 2e-3);
  if (expect_bitwise) {
    std::vector<float> want(model.faithful_bf16.begin(), model.faithful_bf16.end()),
        have(all_got.begin(), all_got.end());
    EXPECT_TRUE(bitwise_equal(want, have, bitwise_what));
  }
  size_t overwritten = 0;
  for (int r = 0; r < p.total_rows(); ++r)
    if (!model.written[r])
      for (int col = 0; col < p.n; ++col) overwritten += got[size_t(r) * p.n + col] != 0xFFFF;
  EXPECT_EQ(overwritten, 0u) << "elements written outside the experts' valid rows";
}

}  // namespace symmoe::test
