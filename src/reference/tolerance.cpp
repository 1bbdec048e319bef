// Allowed device deviation from the kernel-faithful MoE model. See include/symmoe/reference/tolerance.hpp.
#include "symmoe/reference/tolerance.hpp"

#include <algorithm>
#include <cmath>

#include "symmoe/common.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/reference/gemm.hpp"
#include "symmoe/reference/wgmma.hpp"

namespace symmoe::ref {
namespace {

constexpr int kBlock = 128;

// v (1 - rel) and v (1 + rel) as fp32, widened by the one rounding of the conversion.
std::pair<float, float> widened(float v, double rel) {
  const double r = rel + 0x1p-23;
  return {float(double(v) * (1 - r)), float(double(v) * (1 + r))};
}

float scale_of(float amax) { return fmt::scale_for_amax(amax, fmt::kE4M3Max, fmt::ScaleFormat::kUe8m0); }

double dequant_e4m3(float v_over_scale, float scale) {
  return double(fmt::e4m3_to_float(fmt::float_to_e4m3(v_over_scale))) * double(scale);
}

// One bf16 ulp at magnitude x (the spacing of bf16 values around x).
double bf16_ulp(double x) {
  const double ax = std::max(std::fabs(x), 0x1p-126);
  return std::ldexp(1.0, std::ilogb(ax) - 7);
}

// What a lane's L1 codes may move by on a device (0 where they cannot), and the counts.
struct LaneMoves {
  std::vector<double> moved;  // [I] dequantised bound, 0 = cannot move
  float max_scale = 0.f;      // the largest scale any block may take
  size_t fragile_codes = 0, fragile_scales = 0;
};

LaneMoves l1_moves(const std::vector<float>& acc, int I, float weight, float clamp, const Fp8Activations& q,
                   double rel) {
  LaneMoves out;
  out.moved.assign(I, 0.0);
  for (int j = 0; j < I / kBlock; ++j) {
    float h[kBlock], amax = 0.f;
    for (int c = 0; c < kBlock; ++c) {
      h[c] = swiglu_faithful(acc[j * kBlock + c], acc[I + j * kBlock + c], weight, clamp);
      amax = fmt::amax_update(amax, h[c]);
    }
    const float s = q.scales[j];
    const auto [lo, hi] = widened(amax, rel);
    const float s_lo = scale_of(lo), s_hi = scale_of(hi);
    const bool scale_fragile = s_lo != s || s_hi != s;
    out.fragile_scales += scale_fragile;
    out.max_scale = std::max(out.max_scale, std::max(s, s_hi));
    for (int c = 0; c < kBlock; ++c) {
      const int i = j * kBlock + c;
      const double want = double(fmt::e4m3_to_float(q.data[i])) * double(s);
      const auto [h_lo, h_hi] = widened(h[c], rel);
      double moved = 0;
      for (const float sc : {s_lo, s, s_hi})
        for (const float hv : {h_lo, h_hi})
          moved = std::max(moved, std::fabs(dequant_e4m3(hv * (1.f / sc), sc) - want));
      out.fragile_codes += !scale_fragile && moved > 0;
      out.moved[i] = moved;
    }
  }
  return out;
}

// Slack of one lane's L2 fp32 output (before the bf16 rounding), per output channel, given the moved codes.
std::vector<double> l2_slack(const Fp8Activations& hq, const LaneMoves& mv, const Fp8BlockWeights& w2) {
  const int H = w2.num_rows, I = w2.num_cols, num_kb = I / kBlock;
  std::vector<E4m3Parts> a(I);
  for (int i = 0; i < I; ++i) a[i] = e4m3_parts(hq.data[i]);
  std::vector<bool> block_moves(num_kb, false);
  for (int i = 0; i < I; ++i) block_moves[i / kBlock] = block_moves[i / kBlock] || mv.moved[i] > 0;
  std::vector<double> slack(H, 0.0);
  std::vector<E4m3Parts> b(kBlock);
  for (int c = 0; c < H; ++c) {
    double s = 0, mag = 0;
    for (int kb = 0; kb < num_kb; ++kb) {
      const double sb = w2.scale(c, kb * kBlock);
      for (int k = 0; k < kBlock; ++k) {
        const int i = kb * kBlock + k;
        const double w = double(fmt::e4m3_to_float(w2.data[size_t(c) * I + i])) * sb;
        s += mv.moved[i] * std::fabs(w);
        mag += std::fabs(double(fmt::e4m3_to_float(hq.data[i])) * hq.scales[kb] * w);
      }
      if (!block_moves[kb]) continue;
      for (int k = 0; k < kBlock; ++k) b[k] = e4m3_parts(w2.data[size_t(c) * I + kb * kBlock + k]);
      float partial = 0.f;
      double err = 0;
      for (int k = 0; k < kBlock; k += kWgmmaK) {
        const float d = wgmma_e4m3_k32(partial, &a[kb * kBlock + k], &b[k]);
        err += wgmma_e4m3_k32_error_bound(partial, &a[kb * kBlock + k], &b[k], d);
        partial = d;
      }
      s += 3.0 * sb * double(mv.max_scale) * err;
    }
    slack[c] = s + num_kb * 0x1p-23 * (mag + s);
  }
  return slack;
}

}  // namespace

bool e4m3_code_is_fragile(float v, double rel) {
  const auto [lo, hi] = widened(v, rel);
  return fmt::float_to_e4m3(lo) != fmt::float_to_e4m3(hi);
}

bool ue8m0_scale_is_fragile(float amax, double rel) {
  const auto [lo, hi] = widened(amax, rel);
  return scale_of(lo) != scale_of(hi);
}

std::vector<FaithfulWithSlack> moe_forward_faithful_with_slack(const MoeShape& shape, const ExpertWeightMap& weights,
                                                               const std::vector<MoeLayerInput>& inputs, float clamp,
                                                               double rel) {
  const int H = shape.hidden, I = shape.intermediate, K = shape.num_topk;
  std::vector<FaithfulWithSlack> outputs;
  for (size_t s = 0; s < inputs.size(); ++s) {
    const MoeLayerInput& in = inputs[s];
    SYMMOE_CHECK(in.x.num_cols == H && in.routing.num_tokens == in.x.num_rows && in.routing.num_topk == K, "ref",
                 "moe_forward_faithful_with_slack: rank ", s, " x is [", in.x.num_rows, ", ", in.x.num_cols,
                 "], routing [", in.routing.num_tokens, ", ", in.routing.num_topk, "], expected H = ", H, ", K = ", K);
    FaithfulWithSlack out;
    out.y.resize(size_t(in.x.num_rows) * H);
    out.slack.assign(size_t(in.x.num_rows) * H, 0.0);
    std::vector<float> acc(H);
    std::vector<double> row_slack(H), row_mag(H);
    for (int t = 0; t < in.x.num_rows; ++t) {
      std::fill(acc.begin(), acc.end(), 0.f);
      std::fill(row_slack.begin(), row_slack.end(), 0.0);
      std::fill(row_mag.begin(), row_mag.end(), 0.0);
      bool any_move = false;
      for (int k = 0; k < K; ++k) {
        const int64_t e = in.routing.topk_idx[size_t(t) * K + k];
        if (e < 0) continue;
        const auto it = weights.find(int(e));
        SYMMOE_CHECK(it != weights.end(), "ref", "moe_forward_faithful_with_slack: no weights for expert ", e);
        const ExpertWeights& w = it->second;
        const float weight = in.routing.topk_weights[size_t(t) * K + k];
        // expert_mlp_faithful's steps, kept apart to see the L1 values (the row is checked equal by the CPU tests).
        const std::vector<float> l1 = gemm_faithful(in.x, t, t + 1, w.w1);
        const Fp8Activations hq = l1_epilogue(l1, 1, I, {weight}, clamp);
        const std::vector<float> l2 = gemm_faithful(hq, w.w2);
        const LaneMoves mv = l1_moves(l1, I, weight, clamp, hq, rel);
        out.num_codes += size_t(I);
        out.num_fragile_codes += mv.fragile_codes;
        out.num_fragile_scales += mv.fragile_scales;
        const bool moves = std::any_of(mv.moved.begin(), mv.moved.end(), [](double d) { return d > 0; });
        std::vector<double> l2s;
        if (moves) l2s = l2_slack(hq, mv, w.w2);
        any_move = any_move || moves;
        for (int c = 0; c < H; ++c) {
          const float row = fmt::bf16_to_float(fmt::float_to_bf16(l2[c]));
          acc[c] += row;
          row_mag[c] += std::fabs(double(row));
          if (moves) row_slack[c] += l2s[c] + bf16_ulp(std::fabs(double(l2[c])) + l2s[c]);
        }
      }
      for (int c = 0; c < H; ++c) {
        out.y[size_t(t) * H + c] = fmt::float_to_bf16(acc[c]);
        if (any_move)
          out.slack[size_t(t) * H + c] = row_slack[c] + K * 0x1p-23 * (row_mag[c] + row_slack[c]) +
                                         bf16_ulp(std::fabs(double(acc[c])) + row_slack[c]);
      }
    }
    outputs.push_back(std::move(out));
  }
  return outputs;
}

}  // namespace symmoe::ref
