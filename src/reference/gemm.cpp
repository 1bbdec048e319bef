// Golden FP8 GEMMs (exact and kernel-faithful) and the L1 epilogue. See include/symmoe/reference/gemm.hpp.
#include "symmoe/reference/gemm.hpp"

#include <algorithm>
#include <cmath>

#include "symmoe/common.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/swiglu.hpp"
#include "symmoe/reference/wgmma.hpp"

namespace symmoe::ref {
namespace {

constexpr int kBlockK = 128;  // promotion width and scale block of both operands

void check_operands(const Fp8Activations& a, int row_begin, int row_end, const Fp8BlockWeights& b, bool faithful) {
  SYMMOE_CHECK(a.num_cols == b.num_cols, "ref", "gemm: K mismatch, A has ", a.num_cols, " columns, B has ", b.num_cols);
  SYMMOE_CHECK(a.num_cols > 0 && a.num_cols % kBlockK == 0, "ref", "gemm: K must be a positive multiple of 128, got ",
               a.num_cols);
  SYMMOE_CHECK(!faithful || a.block == kBlockK, "ref", "gemm_faithful: A must have per-128 scales, got block ",
               a.block);
  SYMMOE_CHECK(a.block > 0 && a.num_cols % a.block == 0, "ref", "gemm: A block ", a.block, " does not divide K ",
               a.num_cols);
  SYMMOE_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= a.num_rows, "ref", "gemm: row range [", row_begin,
               ", ", row_end, ") outside A's ", a.num_rows, " rows");
  SYMMOE_CHECK(a.data.size() == size_t(a.num_rows) * a.num_cols, "ref", "gemm: A data has ", a.data.size(),
               " bytes, expected ", size_t(a.num_rows) * a.num_cols);
  SYMMOE_CHECK(a.scales.size() == size_t(a.num_rows) * (a.num_cols / a.block), "ref", "gemm: A has ", a.scales.size(),
               " scales, expected ", size_t(a.num_rows) * (a.num_cols / a.block));
  SYMMOE_CHECK(b.data.size() == size_t(b.num_rows) * b.num_cols, "ref", "gemm: B data has ", b.data.size(),
               " bytes, expected ", size_t(b.num_rows) * b.num_cols);
  SYMMOE_CHECK(b.scales.size() == size_t(ceil_div(b.num_rows, 128)) * b.num_scale_cols(), "ref", "gemm: B has ",
               b.scales.size(), " scales, expected ", size_t(ceil_div(b.num_rows, 128)) * b.num_scale_cols());
}

// e4m3 decode of a whole row once (the GEMMs below are O(M*N*K); decoding per use would dominate).
std::vector<E4m3Parts> decode_row(const uint8_t* row, size_t n) {
  std::vector<E4m3Parts> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = e4m3_parts(row[i]);
  return out;
}

}  // namespace

float block_partial_faithful(const E4m3Parts* a, const E4m3Parts* b) {
  float partial = 0.f;  // the first WGMMA of a block runs with scale-d = 0
  for (int k = 0; k < kBlockK; k += kWgmmaK) partial = wgmma_e4m3_k32(partial, a + k, b + k);
  return partial;
}

float promote_faithful(float acc, float scale_a, float scale_b, float partial) {
  return std::fmaf(scale_a * scale_b, partial, acc);
}

std::vector<double> gemm_exact(const Fp8Activations& a, int row_begin, int row_end, const Fp8BlockWeights& b) {
  check_operands(a, row_begin, row_end, b, /*faithful=*/false);
  const int M = row_end - row_begin, N = b.num_rows, K = a.num_cols;
  // Dequantise B once in fp64 (the product e4m3 * fp32 scale is exact in fp64).
  std::vector<double> bd(size_t(N) * K);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      bd[size_t(n) * K + k] = double(fmt::e4m3_to_float(b.data[size_t(n) * K + k])) * double(b.scale(n, k));
  std::vector<double> out(size_t(M) * N);
  std::vector<double> ad(K);
  for (int m = 0; m < M; ++m) {
    const int row = row_begin + m;
    for (int k = 0; k < K; ++k)
      ad[k] = double(fmt::e4m3_to_float(a.data[size_t(row) * K + k])) * double(a.scale(row, k));
    for (int n = 0; n < N; ++n) {
      const double* bn = &bd[size_t(n) * K];
      double sum = 0;
      for (int k = 0; k < K; ++k) sum += ad[k] * bn[k];
      out[size_t(m) * N + n] = sum;
    }
  }
  return out;
}

std::vector<double> gemm_exact(const Fp8Activations& a, const Fp8BlockWeights& b) {
  return gemm_exact(a, 0, a.num_rows, b);
}

std::vector<double> gemm_exact(const std::vector<double>& a, int M, const Fp8BlockWeights& b) {
  const int N = b.num_rows, K = b.num_cols;
  SYMMOE_CHECK(M >= 0 && a.size() == size_t(M) * K, "ref", "gemm_exact: A has ", a.size(),
               " values, expected M*K = ", M, "*", K);
  SYMMOE_CHECK(b.data.size() == size_t(N) * K, "ref", "gemm_exact: B data has ", b.data.size(), " bytes, expected ",
               size_t(N) * K);
  std::vector<double> out(size_t(M) * N, 0.0);
  for (int n = 0; n < N; ++n) {
    std::vector<double> bn(K);
    for (int k = 0; k < K; ++k) bn[k] = double(fmt::e4m3_to_float(b.data[size_t(n) * K + k])) * double(b.scale(n, k));
    for (int m = 0; m < M; ++m) {
      const double* am = &a[size_t(m) * K];
      double sum = 0;
      for (int k = 0; k < K; ++k) sum += am[k] * bn[k];
      out[size_t(m) * N + n] = sum;
    }
  }
  return out;
}

std::vector<float> gemm_faithful(const Fp8Activations& a, int row_begin, int row_end, const Fp8BlockWeights& b) {
  check_operands(a, row_begin, row_end, b, /*faithful=*/true);
  const int M = row_end - row_begin, N = b.num_rows, K = a.num_cols, num_kb = K / kBlockK;
  const std::vector<E4m3Parts> bp = decode_row(b.data.data(), b.data.size());
  std::vector<float> out(size_t(M) * N);
  for (int m = 0; m < M; ++m) {
    const int row = row_begin + m;
    const std::vector<E4m3Parts> ap = decode_row(&a.data[size_t(row) * K], size_t(K));
    for (int n = 0; n < N; ++n) {
      const E4m3Parts* bn = &bp[size_t(n) * K];
      float acc = 0.f;
      for (int kb = 0; kb < num_kb; ++kb) {
        const float partial = block_partial_faithful(&ap[size_t(kb) * kBlockK], bn + size_t(kb) * kBlockK);
        acc = promote_faithful(acc, a.scale(row, kb * kBlockK), b.scale(n, kb * kBlockK), partial);
      }
      out[size_t(m) * N + n] = acc;
    }
  }
  return out;
}

std::vector<float> gemm_faithful(const Fp8Activations& a, const Fp8BlockWeights& b) {
  return gemm_faithful(a, 0, a.num_rows, b);
}

float swiglu_faithful(float gate, float up, float weight, float clamp) {
  return swiglu_weighted(gate, up, weight, clamp);  // include/symmoe/swiglu.hpp: the kernel's formula
}

Fp8Activations l1_epilogue(const std::vector<float>& acc, int M, int I, const std::vector<float>& row_weight,
                           float clamp) {
  SYMMOE_CHECK(M >= 0, "ref", "l1_epilogue: M must be >= 0, got ", M);
  SYMMOE_CHECK(I > 0 && I % 128 == 0, "ref", "l1_epilogue: I must be a positive multiple of 128, got ", I);
  SYMMOE_CHECK(acc.size() == size_t(M) * 2 * I, "ref", "l1_epilogue: acc has ", acc.size(),
               " values, expected M*2I = ", size_t(M) * 2 * I);
  SYMMOE_CHECK(row_weight.size() == size_t(M), "ref", "l1_epilogue: row_weight has ", row_weight.size(),
               " values, expected M = ", M);
  Fp8Activations out;
  out.num_rows = M, out.num_cols = I, out.block = 128;
  out.data.resize(size_t(M) * I);
  out.scales.resize(size_t(M) * (I / 128));
  std::vector<float> h(128);
  for (int m = 0; m < M; ++m) {
    const float* gate = &acc[size_t(m) * 2 * I];
    const float* up = gate + I;
    for (int j = 0; j < I / 128; ++j) {
      float amax = 0.f;
      for (int c = 0; c < 128; ++c) {
        h[c] = swiglu_faithful(gate[j * 128 + c], up[j * 128 + c], row_weight[m], clamp);
        amax = fmt::amax_update(amax, h[c]);
      }
      const float scale = fmt::scale_for_amax(amax, fmt::kE4M3Max, fmt::ScaleFormat::kUe8m0);
      out.scales[size_t(m) * (I / 128) + j] = scale;
      for (int c = 0; c < 128; ++c)
        out.data[size_t(m) * I + j * 128 + c] = fmt::quantize_e4m3(h[c], scale, fmt::ScaleFormat::kUe8m0);
    }
  }
  return out;
}

std::vector<double> swiglu_exact(const std::vector<double>& acc, int M, int I, const std::vector<double>& w,
                                 double clamp) {
  SYMMOE_CHECK(M >= 0 && I > 0, "ref", "swiglu_exact: bad M=", M, " I=", I);
  SYMMOE_CHECK(acc.size() == size_t(M) * 2 * I, "ref", "swiglu_exact: acc has ", acc.size(),
               " values, expected M*2I = ", size_t(M) * 2 * I);
  SYMMOE_CHECK(w.size() == size_t(M), "ref", "swiglu_exact: w has ", w.size(), " values, expected M = ", M);
  std::vector<double> out(size_t(M) * I);
  for (int m = 0; m < M; ++m) {
    for (int i = 0; i < I; ++i) {
      double g = acc[size_t(m) * 2 * I + i], u = acc[size_t(m) * 2 * I + I + i];
      if (clamp > 0) {
        g = std::min(g, clamp);
        u = std::min(std::max(u, -clamp), clamp);
      }
      out[size_t(m) * I + i] = g / (1.0 + std::exp(-g)) * u * w[m];
    }
  }
  return out;
}

}  // namespace symmoe::ref
