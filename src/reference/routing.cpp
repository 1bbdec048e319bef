// Deterministic routing generators. See include/symmoe/reference/routing.hpp.
#include "symmoe/reference/routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>

#include "reference/random.hpp"
#include "symmoe/common.hpp"

namespace symmoe::ref {
namespace {

using rnd::standard_normal;
using rnd::uniform01;
using rnd::uniform_below;

// Draws `count` distinct experts from `weights` (relative, >= 0, enough of them positive) without replacement.
std::vector<int> draw_distinct(std::vector<double> weights, int count, std::mt19937_64& rng) {
  std::vector<int> out;
  for (int i = 0; i < count; ++i) {
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    double target = uniform01(rng) * total;
    int e = 0;
    for (; e < int(weights.size()) - 1; ++e) {
      if (weights[e] > 0 && target < weights[e]) break;
      target -= weights[e];
    }
    while (weights[e] <= 0) --e;  // rounding ran off the end: take the last positive one
    out.push_back(e);
    weights[e] = 0.0;
  }
  return out;
}

}  // namespace

RoutingKind parse_routing_kind(const std::string& name) {
  if (name == "uniform") return RoutingKind::kUniform;
  if (name == "zipf") return RoutingKind::kZipf;
  if (name == "hot") return RoutingKind::kHotExpert;
  SYMMOE_FAIL("ref", "unknown routing '", name, "' (expected uniform, zipf or hot)");
}

const char* routing_kind_name(RoutingKind kind) {
  switch (kind) {
    case RoutingKind::kUniform:
      return "uniform";
    case RoutingKind::kZipf:
      return "zipf";
    case RoutingKind::kHotExpert:
      return "hot";
  }
  return "?";
}

Routing make_routing(int num_tokens, int num_experts, int num_topk, const RoutingOptions& options, int rank) {
  SYMMOE_CHECK(num_tokens >= 0, "ref", "make_routing: num_tokens must be >= 0, got ", num_tokens);
  SYMMOE_CHECK(num_topk >= 1 && num_topk <= num_experts, "ref", "make_routing: num_topk must be in [1, E=", num_experts,
               "], got ", num_topk);
  SYMMOE_CHECK(options.mask_prob >= 0 && options.mask_prob <= 1, "ref",
               "make_routing: mask_prob must be in [0, 1], got ", options.mask_prob);
  const bool hot = options.kind == RoutingKind::kHotExpert;
  SYMMOE_CHECK(!hot || (options.hot_fraction >= 0 && options.hot_fraction <= 1), "ref",
               "make_routing: hot_fraction must be in [0, 1], got ", options.hot_fraction);
  // Every expert keeps a positive popularity (1 / E^s > 0), so K distinct experts can always be drawn.
  SYMMOE_CHECK(options.kind != RoutingKind::kZipf ||
                   (options.zipf_s >= 0 && std::pow(double(num_experts), options.zipf_s) < 1e300),
               "ref", "make_routing: zipf_s must be >= 0 and small enough that E^s < 1e300 (E = ", num_experts,
               "), got ", options.zipf_s);
  SYMMOE_CHECK(!hot || (options.hot_expert >= 0 && options.hot_expert < num_experts), "ref",
               "make_routing: hot_expert must be in [0, ", num_experts, "), got ", options.hot_expert);
  SYMMOE_CHECK(!hot || num_topk < num_experts || options.hot_fraction == 1.0, "ref",
               "make_routing: K == E routes every token to the hot expert; use hot_fraction 1");

  std::mt19937_64 rng(rnd::mix_seed(options.seed, uint64_t(rank)));
  // Expert popularity (relative weights) per kind.
  std::vector<double> popularity(num_experts, 1.0);
  if (options.kind == RoutingKind::kZipf) {
    std::vector<int> order(num_experts);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 perm_rng(options.seed);  // the same popularity order on every rank (Fisher-Yates)
    for (int i = num_experts - 1; i > 0; --i) std::swap(order[i], order[uniform_below(perm_rng, i + 1)]);
    for (int i = 0; i < num_experts; ++i) popularity[order[i]] = 1.0 / std::pow(double(i + 1), options.zipf_s);
  }

  Routing r;
  r.num_tokens = num_tokens, r.num_topk = num_topk;
  r.topk_idx.assign(size_t(num_tokens) * num_topk, -1);
  r.topk_weights.assign(size_t(num_tokens) * num_topk, 0.f);
  for (int t = 0; t < num_tokens; ++t) {
    std::vector<int> experts;
    if (hot) {
      const bool routes_hot = uniform01(rng) < options.hot_fraction;
      std::vector<double> others = popularity;
      others[options.hot_expert] = 0.0;
      experts = draw_distinct(others, routes_hot ? num_topk - 1 : num_topk, rng);
      if (routes_hot) {
        const int lane = uniform_below(rng, num_topk);
        experts.insert(experts.begin() + lane, options.hot_expert);
      }
    } else {
      experts = draw_distinct(popularity, num_topk, rng);
    }
    // Softmax over routed lanes; masked lanes get -1 and weight 0.
    std::vector<double> w(num_topk, 0.0);
    double sum = 0;
    for (int k = 0; k < num_topk; ++k) {
      const bool masked = options.mask_prob > 0 && uniform01(rng) < options.mask_prob;
      const double l = standard_normal(rng);
      if (masked) continue;
      r.topk_idx[size_t(t) * num_topk + k] = experts[k];
      w[k] = std::exp(l);
      sum += w[k];
    }
    for (int k = 0; k < num_topk; ++k) r.topk_weights[size_t(t) * num_topk + k] = sum > 0 ? float(w[k] / sum) : 0.f;
  }
  return r;
}

std::vector<int> count_pairs_per_expert(const std::vector<Routing>& routings, int num_experts) {
  std::vector<int> count(num_experts, 0);
  for (const auto& r : routings)
    for (const int64_t e : r.topk_idx)
      if (e >= 0 && e < num_experts) ++count[e];
  return count;
}

}  // namespace symmoe::ref
