// Golden expert MLP and MoE forward (direct formula and composed path). See include/symmoe/reference/mlp.hpp.
#include "symmoe/reference/mlp.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "reference/random.hpp"
#include "symmoe/common.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/reference/gemm.hpp"

namespace symmoe::ref {
namespace {

std::vector<float> random_normal(size_t n, double stddev, std::mt19937_64& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(rnd::standard_normal(rng) * stddev);
  return v;
}

void check_input(const MoeShape& shape, const MoeLayerInput& in, int rank) {
  SYMMOE_CHECK(in.x.num_cols == shape.hidden && in.x.block == 128, "ref", "moe: rank ", rank, " x is [", in.x.num_rows,
               ", ", in.x.num_cols, "] block ", in.x.block, ", expected H = ", shape.hidden, " and block 128");
  SYMMOE_CHECK(in.routing.num_tokens == in.x.num_rows && in.routing.num_topk == shape.num_topk, "ref", "moe: rank ",
               rank, " routing is [", in.routing.num_tokens, ", ", in.routing.num_topk, "], x has ", in.x.num_rows,
               " rows and K = ", shape.num_topk);
}

const ExpertWeights& expert(const ExpertWeightMap& weights, int64_t e, const MoeShape& shape) {
  const auto it = weights.find(int(e));
  SYMMOE_CHECK(it != weights.end(), "ref", "moe: no weights for expert ", e);
  const ExpertWeights& w = it->second;
  SYMMOE_CHECK(w.w1.num_rows == 2 * shape.intermediate && w.w1.num_cols == shape.hidden &&
                   w.w2.num_rows == shape.hidden && w.w2.num_cols == shape.intermediate,
               "ref", "moe: expert ", e, " weights are W1 [", w.w1.num_rows, ", ", w.w1.num_cols, "] W2 [",
               w.w2.num_rows, ", ", w.w2.num_cols, "], expected [2I, H] and [H, I] for ", shape.to_string());
  return w;
}

}  // namespace

ExpertWeights make_random_expert(int hidden, int intermediate, int expert_idx, uint64_t seed) {
  std::mt19937_64 rng(rnd::mix_seed(seed, 0x10000ull + uint64_t(expert_idx)));
  const auto w1 = rnd::uniform_weights(size_t(2) * intermediate * hidden, 1.0 / std::sqrt(double(hidden)), rng);
  const auto w2 = rnd::uniform_weights(size_t(hidden) * intermediate, 1.0 / std::sqrt(double(intermediate)), rng);
  return {quantize_weights_128x128(w1.data(), 2 * intermediate, hidden),
          quantize_weights_128x128(w2.data(), hidden, intermediate)};
}

ExpertWeightMap make_random_experts(int hidden, int intermediate, const std::vector<Routing>& routings, uint64_t seed) {
  ExpertWeightMap map;
  for (const auto& r : routings)
    for (const int64_t e : r.topk_idx)
      if (e >= 0 && !map.count(int(e))) map[int(e)] = make_random_expert(hidden, intermediate, int(e), seed);
  return map;
}

std::vector<uint16_t> expert_mlp_faithful(const Fp8Activations& x, int row_begin, int row_end, const ExpertWeights& w,
                                          const std::vector<float>& row_weight, float clamp) {
  const int M = row_end - row_begin, I = w.w2.num_cols;
  const std::vector<float> l1 = gemm_faithful(x, row_begin, row_end, w.w1);  // [M, 2I]
  const Fp8Activations h = l1_epilogue(l1, M, I, row_weight, clamp);         // [M, I] e4m3 + ue8m0 scales
  const std::vector<float> l2 = gemm_faithful(h, w.w2);                      // [M, H]
  std::vector<uint16_t> out(l2.size());
  for (size_t i = 0; i < l2.size(); ++i) out[i] = fmt::float_to_bf16(l2[i]);
  return out;
}

std::vector<double> expert_mlp_exact(const Fp8Activations& x, int row_begin, int row_end, const ExpertWeights& w,
                                     const std::vector<double>& row_weight, double clamp) {
  const int M = row_end - row_begin, I = w.w2.num_cols;
  const std::vector<double> l1 = gemm_exact(x, row_begin, row_end, w.w1);
  const std::vector<double> h = swiglu_exact(l1, M, I, row_weight, clamp);
  return gemm_exact(h, M, w.w2);
}

MoeLayerInput make_random_layer_input(const MoeShape& shape, int num_tokens, const RoutingOptions& options, int rank) {
  std::mt19937_64 rng(rnd::mix_seed(options.seed, 0x20000ull + uint64_t(rank)));
  const auto x = random_normal(size_t(num_tokens) * shape.hidden, 1.0, rng);
  MoeLayerInput in;
  in.x = quantize_activations(x.data(), num_tokens, shape.hidden, 128, fmt::ScaleFormat::kFp32);
  in.routing = make_routing(num_tokens, shape.num_experts, shape.num_topk, options, rank);
  return in;
}

std::vector<std::vector<uint16_t>> moe_forward_faithful(const MoeShape& shape, const ExpertWeightMap& weights,
                                                        const std::vector<MoeLayerInput>& inputs, float clamp) {
  const int H = shape.hidden, K = shape.num_topk;
  std::vector<std::vector<uint16_t>> outputs;
  for (size_t s = 0; s < inputs.size(); ++s) {
    const MoeLayerInput& in = inputs[s];
    check_input(shape, in, int(s));
    std::vector<uint16_t> y(size_t(in.x.num_rows) * H);
    std::vector<float> acc(H);
    for (int t = 0; t < in.x.num_rows; ++t) {
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int k = 0; k < K; ++k) {
        const int64_t e = in.routing.topk_idx[size_t(t) * K + k];
        if (e < 0) continue;
        const float w = in.routing.topk_weights[size_t(t) * K + k];
        const auto row = expert_mlp_faithful(in.x, t, t + 1, expert(weights, e, shape), {w}, clamp);
        for (int c = 0; c < H; ++c) acc[c] += fmt::bf16_to_float(row[c]);
      }
      for (int c = 0; c < H; ++c) y[size_t(t) * H + c] = fmt::float_to_bf16(acc[c]);
    }
    outputs.push_back(std::move(y));
  }
  return outputs;
}

std::vector<std::vector<double>> moe_forward_exact(const MoeShape& shape, const ExpertWeightMap& weights,
                                                   const std::vector<MoeLayerInput>& inputs, double clamp) {
  const int H = shape.hidden, K = shape.num_topk;
  std::vector<std::vector<double>> outputs;
  for (size_t s = 0; s < inputs.size(); ++s) {
    const MoeLayerInput& in = inputs[s];
    check_input(shape, in, int(s));
    std::vector<double> y(size_t(in.x.num_rows) * H, 0.0);
    for (int t = 0; t < in.x.num_rows; ++t) {
      for (int k = 0; k < K; ++k) {
        const int64_t e = in.routing.topk_idx[size_t(t) * K + k];
        if (e < 0) continue;
        const double w = in.routing.topk_weights[size_t(t) * K + k];
        const auto row = expert_mlp_exact(in.x, t, t + 1, expert(weights, e, shape), {w}, clamp);
        for (int c = 0; c < H; ++c) y[size_t(t) * H + c] += row[c];
      }
    }
    outputs.push_back(std::move(y));
  }
  return outputs;
}

DispatchInput make_dispatch_input(const MoeLayerInput& in) {
  DispatchInput d;
  d.num_tokens = in.x.num_rows;
  d.x_row_bytes = in.x.num_cols;
  d.sf_row_bytes = int(sizeof(float)) * (in.x.num_cols / in.x.block);
  d.x = in.x.data;
  d.x_sf.resize(in.x.scales.size() * sizeof(float));
  std::memcpy(d.x_sf.data(), in.x.scales.data(), d.x_sf.size());
  d.topk_idx = in.routing.topk_idx;
  d.topk_weights = in.routing.topk_weights;
  return d;
}

std::vector<CombineInput> run_local_experts(const MoeShape& shape, const ExpertWeightMap& weights,
                                            const std::vector<DispatchOutput>& dispatched, float clamp) {
  const int H = shape.hidden;
  std::vector<CombineInput> out(dispatched.size());
  for (size_t d = 0; d < dispatched.size(); ++d) {
    const DispatchOutput& dd = dispatched[d];
    const EpHandle& h = dd.handle;
    SYMMOE_CHECK(h.do_expand, "ref", "run_local_experts: rank ", d, " was dispatched without expand");
    // The expanded rows as one Fp8Activations [num_expanded, H] (padding rows included; they are never read).
    Fp8Activations x;
    x.num_rows = h.num_expanded_tokens, x.num_cols = H, x.block = 128;
    x.data = dd.recv_x;
    x.scales.resize(size_t(x.num_rows) * (H / 128));
    SYMMOE_CHECK(dd.recv_sf.size() == x.scales.size() * sizeof(float), "ref", "run_local_experts: rank ", d,
                 " recv_sf has ", dd.recv_sf.size(), " bytes, expected ", x.scales.size() * sizeof(float));
    std::memcpy(x.scales.data(), dd.recv_sf.data(), dd.recv_sf.size());
    out[d].x.assign(size_t(h.num_expanded_tokens) * H, 0);
    for (int e = 0; e < h.num_local_experts(); ++e) {
      const int begin = h.expert_start(e), end = begin + h.num_unaligned_recv_tokens_per_expert[e];
      if (begin == end) continue;
      const std::vector<float> w(dd.recv_topk_weights.begin() + begin, dd.recv_topk_weights.begin() + end);
      const auto y =
          expert_mlp_faithful(x, begin, end, expert(weights, int64_t(d) * h.num_local_experts() + e, shape), w, clamp);
      std::copy(y.begin(), y.end(), out[d].x.begin() + size_t(begin) * H);
    }
  }
  return out;
}

std::vector<std::vector<uint16_t>> moe_forward_composed(const MoeShape& shape, const ExpertWeightMap& weights,
                                                        const std::vector<MoeLayerInput>& inputs, float clamp,
                                                        int expert_alignment) {
  DispatchConfig config;
  config.num_ranks = shape.num_ranks, config.num_experts = shape.num_experts, config.num_topk = shape.num_topk;
  config.num_max_tokens_per_rank = shape.num_max_tokens_per_rank, config.expert_alignment = expert_alignment;
  config.do_expand = true;
  std::vector<DispatchInput> dispatch_inputs;
  for (size_t s = 0; s < inputs.size(); ++s) {
    check_input(shape, inputs[s], int(s));
    dispatch_inputs.push_back(make_dispatch_input(inputs[s]));
  }
  const auto dispatched = dispatch(config, dispatch_inputs);
  const auto expert_out = run_local_experts(shape, weights, dispatched, clamp);
  std::vector<EpHandle> handles;
  for (const auto& d : dispatched) handles.push_back(d.handle);
  const auto combined = combine(handles, shape.hidden, expert_out);
  std::vector<std::vector<uint16_t>> y;
  for (const auto& c : combined) y.push_back(c.combined_x);
  return y;
}

MoeLayerInput select_tokens(const MoeLayerInput& in, const std::vector<int>& tokens) {
  MoeLayerInput out;
  const int H = in.x.num_cols, K = in.routing.num_topk, sb = H / in.x.block;
  out.x.num_rows = out.routing.num_tokens = int(tokens.size());
  out.x.num_cols = H, out.x.block = in.x.block, out.routing.num_topk = K;
  for (const int t : tokens) {
    SYMMOE_CHECK(t >= 0 && t < in.x.num_rows, "ref", "select_tokens: token ", t, " outside [0, ", in.x.num_rows, ")");
    out.x.data.insert(out.x.data.end(), in.x.data.begin() + size_t(t) * H, in.x.data.begin() + size_t(t + 1) * H);
    out.x.scales.insert(out.x.scales.end(), in.x.scales.begin() + size_t(t) * sb,
                        in.x.scales.begin() + size_t(t + 1) * sb);
    out.routing.topk_idx.insert(out.routing.topk_idx.end(), in.routing.topk_idx.begin() + size_t(t) * K,
                                in.routing.topk_idx.begin() + size_t(t + 1) * K);
    out.routing.topk_weights.insert(out.routing.topk_weights.end(), in.routing.topk_weights.begin() + size_t(t) * K,
                                    in.routing.topk_weights.begin() + size_t(t + 1) * K);
  }
  return out;
}

}  // namespace symmoe::ref
