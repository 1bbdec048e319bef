// Deterministic routing generators for the golden model, tests and `symmoe run`.
//
// Contract: a Routing is one rank's router output, as DeepEP takes it:
//   topk_idx     int64 [T, K]  global expert id in [0, E), or -1 for a masked (not routed) lane
//   topk_weights fp32  [T, K]  > 0 for routed lanes (softmax over the token's routed lanes), 0 for masked lanes
// Experts within a token are distinct. Generators draw from std::mt19937_64 seeded from (seed, rank) only, with
// our own uniform/normal/discrete draws (std:: distributions differ between standard libraries), so the options
// name the same routing on every machine.
//   uniform  K distinct experts, uniformly
//   zipf     expert popularity ~ 1 / popularity_rank^s over a seeded random permutation of the experts, K distinct
//            (drawn one at a time without replacement)
//   hot      with probability hot_fraction the token routes to hot_expert (in a random lane); otherwise it avoids
//            hot_expert; the other lanes are uniform. So hot_expert appears in ~hot_fraction of tokens.
//   masking  after drawing, each lane independently becomes -1 with probability mask_prob (an all-masked token is
//            possible; tests also force one explicitly).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace symmoe::ref {

struct Routing {
  int num_tokens = 0, num_topk = 0;
  std::vector<int64_t> topk_idx;    // [T, K]
  std::vector<float> topk_weights;  // [T, K]
};

enum class RoutingKind { kUniform, kZipf, kHotExpert };

struct RoutingOptions {
  RoutingKind kind = RoutingKind::kUniform;
  double zipf_s = 1.2;  // Zipf exponent
  int hot_expert = 0;   // kHotExpert: the expert that gets hot_fraction of the tokens
  double hot_fraction = 0.5;
  double mask_prob = 0.0;  // probability that a lane becomes -1
  uint64_t seed = 1;
};

// "uniform" | "zipf" | "hot"; throws symmoe::Error on anything else.
RoutingKind parse_routing_kind(const std::string& name);
const char* routing_kind_name(RoutingKind kind);

// One rank's routing. `rank` salts the seed so ranks differ. Throws symmoe::Error on K > E, K < 1, T < 0.
Routing make_routing(int num_tokens, int num_experts, int num_topk, const RoutingOptions& options, int rank = 0);

// Number of routed (token, lane) pairs per global expert, over the given routings.
std::vector<int> count_pairs_per_expert(const std::vector<Routing>& routings, int num_experts);

}  // namespace symmoe::ref
