// Shared fixtures of the MoE layer GPU tests (tests/gpu/test_moe.cu: composed path; tests/gpu/test_mega.cu: fused
// kernel vs composed path): rank setup with weights (host-uploaded or GPU-synthetic) and the composed layer, random
// inputs per case (with an explicit all-masked token), poisoning, and the golden-model comparison with the
// tolerances explained in test_moe.cu's header. Included by exactly one test file per binary (anonymous namespace).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <atomic>
#include <future>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/compare.hpp"
#include "gpu/device_array.hpp"
#include "moe/layer_check.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/moe.hpp"
#include "symmoe/moe_weights.hpp"
#include "symmoe/reference/mlp.hpp"
#include "symmoe/reference/tolerance.hpp"

namespace symmoe {
namespace {

using test::num_gpus;

using test::fresh_seed;  // SYMMOE_TEST_SEED reproduces a run (gpu/device_array.hpp)

using test::DevMem;
using test::upload;

std::vector<uint16_t> download_bf16(int device, const void* src, size_t count) {
  std::vector<uint16_t> out(count);
  SYMMOE_CUDA_CHECK(cudaSetDevice(device));
  if (count) SYMMOE_CUDA_CHECK(cudaMemcpy(out.data(), src, count * 2, cudaMemcpyDeviceToHost));
  return out;
}

using test::poison;  // 0xFF: bf16 0xFFFF = NaN

// One rank configuration: communicator, shape, weights (device + the host copy the golden model reads), layer.
struct Setup {
  std::unique_ptr<Communicator> comm;
  MoeShape shape;
  ref::ExpertWeightMap host_weights;  // experts the golden model may need
  MoeWeightStore store;
  std::unique_ptr<ComposedMoe> layer;
  std::vector<int> devices;  // per local rank
  uint64_t weight_seed = 0;
  bool synthetic = false;
  float clamp = 0.f;
};

MoeShape small_shape(int ranks, int max_tokens) {
  MoeShape s;
  s.hidden = 512, s.intermediate = 256, s.num_experts = 32, s.num_topk = 6;
  s.num_ranks = ranks, s.num_max_tokens_per_rank = max_tokens;
  return s;
}

// The model-shape tests' parameter (test_mega.cu, test_mega_fp4.cu): flash, pro and v3, each on one rank per GPU
// (ranks 0) and on 8 virtual ranks; named <shape>_one_per_gpu / <shape>_virtual8.
struct ShapeParam {
  const char* shape;
  int ranks;  // 0: one per GPU
};
inline auto model_shape_params() {
  return ::testing::Values(ShapeParam{"flash", 0}, ShapeParam{"flash", 8}, ShapeParam{"pro", 0}, ShapeParam{"pro", 8},
                           ShapeParam{"v3", 0}, ShapeParam{"v3", 8});
}
// The Qwen3 presets the same way (test_mega.cu): <shape>_one_per_gpu / <shape>_virtual8.
inline auto qwen_shape_params() {
  return ::testing::Values(ShapeParam{"qwen3-30b-a3b", 0}, ShapeParam{"qwen3-30b-a3b", 8},
                           ShapeParam{"qwen3-235b-a22b", 0}, ShapeParam{"qwen3-235b-a22b", 8});
}
inline std::string shape_param_name(const ::testing::TestParamInfo<ShapeParam>& info) {
  std::string name = info.param.shape;  // a test name takes letters, digits and '_' only
  std::replace(name.begin(), name.end(), '-', '_');
  return name + (info.param.ranks == 0 ? "_one_per_gpu" : "_virtual" + std::to_string(info.param.ranks));
}

// from_host: random golden-model weights, transformed and uploaded; else synthetic weights generated on the GPU
// (the host regenerates the experts it needs). All experts are made on the host for the small shape.
// timeout_ms: the communicator's wait bound (-1: SYMMOE_TIMEOUT_MS, default 10 s).
std::unique_ptr<Setup> make_setup(const MoeShape& base, bool from_host, int alignment, float clamp, bool all_experts,
                                  int timeout_ms = 20000) {
  auto s = std::make_unique<Setup>();
  s->comm = Communicator::in_process(base.num_ranks, timeout_ms);
  s->shape = base;
  s->weight_seed = fresh_seed();
  s->synthetic = !from_host;
  s->clamp = clamp;
  for (const auto& p : s->comm->local_ranks()) s->devices.push_back(p.device);
  if (from_host) {
    for (int e = 0; e < base.num_experts; ++e)
      s->host_weights[e] = ref::make_random_expert(base.hidden, base.intermediate, e, s->weight_seed);
    s->store = MoeWeightStore::from_host(*s->comm, base, s->host_weights);
  } else {
    s->store = MoeWeightStore::synthetic(*s->comm, base, s->weight_seed);
    if (all_experts)
      for (int e = 0; e < base.num_experts; ++e)
        s->host_weights[e] = synthetic::host_expert(base.hidden, base.intermediate, e, s->weight_seed);
  }
  ComposedMoeOptions o;
  o.expert_alignment = alignment, o.clamp = clamp;
  s->layer = std::make_unique<ComposedMoe>(*s->comm, base, s->store.views(), o);
  std::printf("  setup: %s, %s weights (seed %llu), alignment %d, clamp %g, row capacity %d\n",
              base.to_string().c_str(), from_host ? "host-uploaded" : "GPU-synthetic",
              (unsigned long long)s->weight_seed, alignment, clamp, s->layer->row_capacity());
  return s;
}

struct Case {
  ref::RoutingKind kind = ref::RoutingKind::kUniform;
  double mask = 0;
  int tokens = 1;
  uint64_t seed = 1;
};
// Every layer test walks these routings (uniform, Zipf, one hot expert, 30% masked lanes) x its token counts;
// case seeds are base, base + 1, ... in that order.
std::vector<Case> layer_cases(std::initializer_list<int> token_counts, uint64_t base) {
  const struct {
    ref::RoutingKind kind;
    double mask;
  } routings[] = {{ref::RoutingKind::kUniform, 0.0},
                  {ref::RoutingKind::kZipf, 0.0},
                  {ref::RoutingKind::kHotExpert, 0.0},
                  {ref::RoutingKind::kUniform, 0.3}};
  std::vector<Case> cases;
  for (const auto& rt : routings)
    for (const int T : token_counts) {
      Case c;
      c.kind = rt.kind, c.mask = rt.mask, c.tokens = T, c.seed = base + uint64_t(cases.size());
      cases.push_back(c);
    }
  return cases;
}

std::string case_name(const Case& c) {
  return std::string(ref::routing_kind_name(c.kind)) + (c.mask > 0 ? "+mask" : "") + " T=" + std::to_string(c.tokens);
}

// Host inputs of every rank and their device copies.
struct Inputs {
  std::vector<ref::MoeLayerInput> host;
  std::vector<DevMem> x, sf, idx, w, y;
  std::vector<MoeForwardArgs> args;
};

Inputs make_inputs(const Setup& s, const Case& c) {
  Inputs in;
  const int R = s.shape.num_ranks, K = s.shape.num_topk, H = s.shape.hidden;
  // Each rank's input depends only on (seed, rank): drawn on one host thread per rank.
  std::vector<std::future<ref::MoeLayerInput>> draws;
  for (int r = 0; r < R; ++r)
    draws.push_back(std::async(std::launch::async, [&s, &c, K, r] {
      ref::RoutingOptions ro;
      ro.kind = c.kind, ro.mask_prob = c.mask, ro.seed = c.seed;
      ro.hot_expert = int(c.seed % uint64_t(s.shape.num_experts));
      ro.hot_fraction = K < s.shape.num_experts ? 0.7 : 1.0;  // K == E: every token takes every expert
      auto li = ref::make_random_layer_input(s.shape, c.tokens, ro, r);
      // An all-masked token, explicitly: token 1 (token 0 when T == 1, on rank 0 only, so other ranks still route).
      if (c.mask > 0 && (c.tokens > 1 || r == 0)) {
        const int t = c.tokens > 1 ? 1 : 0;
        for (int k = 0; k < K; ++k)
          li.routing.topk_idx[size_t(t) * K + k] = -1, li.routing.topk_weights[size_t(t) * K + k] = 0.f;
      }
      return li;
    }));
  for (auto& d : draws) in.host.push_back(d.get());
  for (int i = 0; i < R; ++i) {
    const int dev = s.devices[i];
    const auto& h = in.host[i];
    in.x.push_back(upload(dev, h.x.data));
    in.sf.push_back(upload(dev, h.x.scales));
    in.idx.push_back(upload(dev, h.routing.topk_idx));
    in.w.push_back(upload(dev, h.routing.topk_weights));
    in.y.emplace_back(dev, size_t(c.tokens) * H * 2);
  }
  for (int i = 0; i < R; ++i) {
    MoeForwardArgs a;
    a.num_tokens = c.tokens;
    a.x = in.x[i].as<uint8_t>(), a.x_scales = in.sf[i].as<float>();
    a.topk_idx = in.idx[i].as<int64_t>(), a.topk_weights = in.w[i].as<float>();
    a.y = in.y[i].as<uint16_t>();
    in.args.push_back(a);
  }
  return in;
}

// The tokens the golden model checks on each rank: all of them up to 16, else every 8th plus token 1.
std::vector<int> checked_tokens(int T) {
  std::vector<int> t;
  for (int i = 0; i < T; ++i)
    if (T <= 16 || i % 8 == 0 || i == 1) t.push_back(i);
  return t;
}

// The golden model (faithful with its slack, and exact) of each rank's sliced input. The model is a direct formula
// per token, so each rank's tokens are cut into chunks and the (rank, chunk, mode) jobs share every host core (the
// flash experts cost ~0.3 s per (token, lane) and mode on one core); the chunks' results are concatenated in order.
void golden_per_rank(const MoeShape& shape, const ref::ExpertWeightMap& w, const std::vector<ref::MoeLayerInput>& in,
                     float clamp, std::vector<ref::FaithfulWithSlack>& faithful,
                     std::vector<std::vector<double>>& exact) {
  const size_t R = in.size();
  size_t total_rows = 0;
  for (const auto& x : in) total_rows += size_t(x.x.num_rows);
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t rows_per_chunk = std::max<size_t>(1, (2 * total_rows + cores - 1) / cores);  // ~one job per core
  struct Chunk {
    size_t rank;
    std::vector<int> rows;  // of in[rank]
    ref::FaithfulWithSlack faithful;
    std::vector<double> exact;
  };
  std::vector<Chunk> chunks;
  for (size_t r = 0; r < R; ++r)
    for (int t0 = 0; t0 < in[r].x.num_rows; t0 += int(rows_per_chunk)) {
      Chunk c{r, {}, {}, {}};
      for (int t = t0; t < std::min<int>(in[r].x.num_rows, t0 + int(rows_per_chunk)); ++t) c.rows.push_back(t);
      chunks.push_back(std::move(c));
    }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j; (j = next.fetch_add(1)) < 2 * chunks.size();) {
      Chunk& c = chunks[j / 2];
      const ref::MoeLayerInput part = ref::select_tokens(in[c.rank], c.rows);
      if (j % 2 == 0)
        c.faithful = ref::moe_forward_faithful_with_slack(shape, w, {part}, clamp)[0];
      else
        c.exact = ref::moe_forward_exact(shape, w, {part}, clamp)[0];
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 0; i < std::min(cores, 2 * chunks.size()); ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < R; ++r) faithful[r] = {}, exact[r].clear();
  for (Chunk& c : chunks) {
    ref::FaithfulWithSlack& f = faithful[c.rank];
    f.y.insert(f.y.end(), c.faithful.y.begin(), c.faithful.y.end());
    f.slack.insert(f.slack.end(), c.faithful.slack.begin(), c.faithful.slack.end());
    f.num_codes += c.faithful.num_codes, f.num_fragile_codes += c.faithful.num_fragile_codes;
    f.num_fragile_scales += c.faithful.num_fragile_scales;
    exact[c.rank].insert(exact[c.rank].end(), c.exact.begin(), c.exact.end());
  }
}

// Compares y (per rank, bf16 [T, H]) with the golden model on the checked tokens; all-masked tokens must be
// exact zeros everywhere (checked on every token, not only the sampled ones).
// vs the kernel-faithful model: element by element within ref::moe_forward_faithful_with_slack's slack, which is
// derived from the numerics in include/symmoe/reference/tolerance.hpp: the model runs the kernels' arithmetic bit
// for bit (the FP8 WGMMA's truncated accumulation included, reference/wgmma.hpp) except expf, whose ulps can move
// an L1 value by < 2^-19 relative; so a token none of whose FP8 codes or block scales lies that close to a rounding
// boundary must be bitwise equal (slack 0), and the others may move by the one-FP8-step flips of exactly those
// codes, propagated through L2, the bf16 roundings and the combine. No seed-tuned constant.
// vs the exact (fp64) model: the faithful model's own error is ~0.027 (e4m3 L2 input); the GPU must not be
// meaningfully worse (<= 1.25 x the model's error + 5e-3): a coarse second opinion on the same data.
void expect_matches_golden(Setup& s, const Inputs& in, const std::vector<std::vector<uint16_t>>& y,
                           const std::string& what, const char* layer_name = "composed layer") {
  const int R = s.shape.num_ranks, H = s.shape.hidden, K = s.shape.num_topk;
  std::vector<ref::MoeLayerInput> sliced;
  std::vector<std::vector<int>> tokens;
  for (int r = 0; r < R; ++r) {
    tokens.push_back(checked_tokens(in.host[r].x.num_rows));
    sliced.push_back(ref::select_tokens(in.host[r], tokens.back()));
  }
  if (s.synthetic && s.host_weights.size() < size_t(s.shape.num_experts)) {  // flash: only the touched experts
    std::vector<ref::Routing> routings;
    for (const auto& x : sliced) routings.push_back(x.routing);
    s.host_weights = synthetic::host_experts(H, s.shape.intermediate, routings, s.weight_seed);
  }
  std::vector<ref::FaithfulWithSlack> faithful(R);
  std::vector<std::vector<double>> exact(R);
  golden_per_rank(s.shape, s.host_weights, sliced, s.clamp, faithful, exact);
  std::vector<double> want_f, want_e, got;
  size_t equal = 0, outside = 0, masked_tokens = 0, masked_nonzero = 0, fragile_tokens = 0, codes = 0,
         fragile_codes = 0, fragile_scales = 0;
  std::ostringstream first_outside;
  for (int r = 0; r < R; ++r) {
    const ref::FaithfulWithSlack& f = faithful[r];
    codes += f.num_codes, fragile_codes += f.num_fragile_codes, fragile_scales += f.num_fragile_scales;
    for (size_t j = 0; j < tokens[r].size(); ++j) {
      const int t = tokens[r][j];
      bool fragile = false;
      for (int c = 0; c < H; ++c) {
        const size_t i = j * H + c;
        const uint16_t g = y[r][size_t(t) * H + c], m = f.y[i];
        const double gv = fmt::bf16_to_float(g), mv = fmt::bf16_to_float(m);
        fragile |= f.slack[i] > 0;
        equal += g == m;
        if (g != m && !(std::fabs(gv - mv) <= f.slack[i])) {
          if (outside < 5)
            first_outside << "\n  rank " << r << " token " << t << " channel " << c << ": model " << mv << " (0x"
                          << std::hex << m << ") got " << gv << " (0x" << g << std::dec << "), slack " << f.slack[i];
          ++outside;
        }
        want_f.push_back(mv);
        want_e.push_back(exact[r][i]);
        got.push_back(gv);
      }
      fragile_tokens += fragile;
    }
    for (int t = 0; t < in.host[r].x.num_rows; ++t) {
      bool routed = false;
      for (int k = 0; k < K; ++k) routed |= in.host[r].routing.topk_idx[size_t(t) * K + k] >= 0;
      if (routed) continue;
      ++masked_tokens;
      for (int c = 0; c < H; ++c) masked_nonzero += y[r][size_t(t) * H + c] != 0;
    }
  }
  const double err_f = test::rel_frobenius(want_f, got);
  const double err_e = test::rel_frobenius(want_e, got);
  const double model_e = test::rel_frobenius(want_e, want_f);
  const size_t num_tokens = got.size() / size_t(H);
  std::printf(
      "    [%s] %zu values: %.2f%% bitwise equal to the faithful model (%zu outside the slack, rel err %.2e); "
      "%zu of %zu tokens with fragile FP8 codes (%zu of %zu codes, %zu scales); vs exact %.4f (golden model "
      "%.4f); %zu all-masked tokens\n",
      what.c_str(), got.size(), 100.0 * double(equal) / double(std::max<size_t>(got.size(), 1)), outside, err_f,
      fragile_tokens, num_tokens, fragile_codes, codes, fragile_scales, err_e, model_e, masked_tokens);
  EXPECT_EQ(outside, 0u) << what << ": " << layer_name << " outside the kernel-faithful model's derived slack "
                         << "(reference/tolerance.hpp); first:" << first_outside.str();
  EXPECT_LE(err_e, 1.25 * model_e + 5e-3)
      << what << ": " << layer_name << " vs exact model (golden model: " << model_e << ")";
  EXPECT_EQ(masked_nonzero, 0u) << what << ": all-masked tokens must give zeros";
}

// Each rank's y (bf16 [T, H]) at `ptrs`, downloaded.
std::vector<std::vector<uint16_t>> download_y(const Setup& s, const std::vector<const uint16_t*>& ptrs,
                                              const Inputs& in) {
  return moe::download_y(*s.comm, ptrs, in.args, s.shape.hidden);
}

// Poisons each rank's y at `ptrs`.
void poison_all(const Setup& s, const std::vector<const uint16_t*>& ptrs, const Inputs& in) {
  moe::poison_y(*s.comm, ptrs, in.args, s.shape.hidden);
}

// Each rank's all-masked tokens (no routed lane) must be exact zeros in its y (bf16 [T, H]); every token checked.
void expect_all_masked_tokens_zero(const Setup& s, const Inputs& in, const std::vector<std::vector<uint16_t>>& y,
                                   const std::string& what) {
  const int H = s.shape.hidden, K = s.shape.num_topk;
  for (size_t i = 0; i < y.size(); ++i)
    for (int t = 0; t < in.host[i].x.num_rows; ++t) {
      bool masked = true;
      for (int k = 0; k < K; ++k) masked = masked && in.host[i].routing.topk_idx[size_t(t) * K + k] < 0;
      if (!masked) continue;
      for (int h = 0; h < H; ++h)
        if (y[i][size_t(t) * H + h] != 0) {
          ADD_FAILURE() << what << " rank " << i << " token " << t << " is all-masked but y[" << h << "] = 0x"
                        << std::hex << y[i][size_t(t) * H + h];
          break;
        }
    }
}

// `layer` (composed or fused) into the callers' y (in.args), poisoned (moe/layer_check.hpp): each rank's output.
template <typename Layer>
std::vector<std::vector<uint16_t>> forward_into_poisoned_y(const Setup& s, Layer& layer, const Inputs& in) {
  return moe::forward_into_poisoned_y(*s.comm, layer, in.args, s.shape.hidden).values;
}

// The fused-vs-composed harness (moe/layer_check.hpp) on the case's inputs, each layer into its own poisoned buffer
// (y = null): expects bitwise equality and returns the fused layer's output.
template <typename Fused>
moe::LayerOutput expect_fused_equals_composed(const Setup& s, Fused& fused, const Inputs& in, const std::string& what) {
  auto own_y = in.args;
  for (auto& a : own_y) a.y = nullptr;
  const moe::LayerComparison c = moe::compare_layers_bitwise(*s.comm, *s.layer, own_y, fused, own_y, s.shape.hidden);
  EXPECT_TRUE(c.diff.equal()) << what << ": fused vs composed: " << c.diff.to_string();
  return c.tested;
}

// Host checks of `layer.forward` (composed or fused) that fire before anything is launched: num_tokens past T_max
// on the last rank (the error names it), and one args entry too few.
template <typename Layer>
void expect_bad_arguments_refused(const Setup& s, Layer& layer, const Inputs& in) {
  const int too_many = s.shape.num_max_tokens_per_rank + 1;
  auto bad = in.args;
  bad.back().num_tokens = too_many;
  try {
    layer.forward(bad);
    ADD_FAILURE() << "num_tokens > T_max was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_tokens " + std::to_string(too_many)), std::string::npos) << e.what();
  }
  bad = in.args;
  bad.pop_back();
  EXPECT_THROW(layer.forward(bad), Error);
}

}  // namespace
// Captures one call of `forward` on every local rank's stream into CUDA graphs (captured together: the ranks'
// kernels wait on each other), replays them `replays` times into a poisoned y and expects y bitwise equal to the
// eager result every time.
void expect_graph_replays_bitwise(Setup& s, const Inputs& in, const std::vector<std::vector<uint16_t>>& eager,
                                  const std::function<void()>& forward, int replays) {
  const int R = s.shape.num_ranks, H = s.shape.hidden;
  std::vector<cudaGraphExec_t> execs(R);
  for (int i = 0; i < R; ++i) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(s.devices[i]));
    SYMMOE_CUDA_CHECK(cudaStreamBeginCapture(s.comm->stream(i), cudaStreamCaptureModeRelaxed));
  }
  forward();
  for (int i = 0; i < R; ++i) {
    cudaGraph_t graph;
    SYMMOE_CUDA_CHECK(cudaSetDevice(s.devices[i]));
    SYMMOE_CUDA_CHECK(cudaStreamEndCapture(s.comm->stream(i), &graph));
    SYMMOE_CUDA_CHECK(cudaGraphInstantiate(&execs[i], graph, 0));
    SYMMOE_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  for (int rep = 0; rep < replays; ++rep) {
    for (int i = 0; i < R; ++i) poison(s.devices[i], in.args[i].y, size_t(in.args[i].num_tokens) * H * 2);
    for (int i = 0; i < R; ++i) {
      SYMMOE_CUDA_CHECK(cudaSetDevice(s.devices[i]));
      SYMMOE_CUDA_CHECK(cudaGraphLaunch(execs[i], s.comm->stream(i)));
    }
    s.comm->synchronize();
    for (int i = 0; i < R; ++i)
      EXPECT_TRUE(test::bitwise_equal(eager[i],
                                      download_bf16(s.devices[i], in.args[i].y, size_t(in.args[i].num_tokens) * H),
                                      "replay " + std::to_string(rep) + " rank " + std::to_string(i)));
    if (::testing::Test::HasFailure()) break;
  }
  for (auto e : execs) SYMMOE_CUDA_CHECK(cudaGraphExecDestroy(e));
}

}  // namespace symmoe
