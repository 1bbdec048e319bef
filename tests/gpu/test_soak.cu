// Time-bounded soak of the fused layer (MegaMoe) and the EP path (ComposedMoe: dispatch -> grouped GEMMs ->
// combine) on random shapes, routings and token counts. Run it long on the device:
//   build/gpu_test_soak --seconds=120          (default 10 s, so the normal suite stays short)
// Each epoch (a new random shape: ranks 1/2/4 in-process, H, I, E, K, T_max within the fused kernel's compiled
// limits, expert alignment, clamp) builds both layers on GPU-synthetic weights; then, until the epoch's time is up,
// every call draws a routing (uniform, Zipf, one hot expert, 30% masked lanes with an all-masked token, or every
// lane masked) and a token count in [1, T_max] per rank, runs the fused layer into a poisoned y and checks it
// against the composed path, alternately on the same batch (y bitwise equal on every token) and on sampled tokens
// only (ref::select_tokens: a different batch, hence different plans and pool order; their rows must agree
// bitwise, since an output row depends only on its own input row); all-masked tokens must be zeros. Every 8th call
// also captures the fused forward in CUDA graphs and replays it into poisoned y: bitwise the eager result.
// A hang surfaces as the library's PeerTimeout naming the stalled peer and wait site (each wait is bounded by
// kWaitTimeoutMs); it is reported and ends the soak. The last line reports calls, tokens compared, graph replays,
// mismatches (must be 0) and timeouts (must be 0).
// Time: the soak ends within --seconds plus kGraceSeconds also when other work shares the GPUs (every step then
// takes longer): the clock is read before each epoch, call and graph check, and one is started only when its
// measured cost (the slowest seen so far) still fits before --seconds. A watchdog thread is the last resort: at
// --seconds + kGraceSeconds it prints the step the soak is in (epoch, call, shape, phase) and ends the process with
// exit status 1.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpu/moe_fixture.hpp"
#include "symmoe/mega_moe.hpp"
#include "symmoe/plan.hpp"

namespace symmoe {
namespace {

constexpr double kDefaultSeconds = 10;
constexpr int kGraphEvery = 8;         // calls between CUDA-graph checks
constexpr int kGraphReplays = 3;       // replays per graph check
constexpr int kWaitTimeoutMs = 10000;  // each cross-rank wait; a stall is a PeerTimeout after this long
constexpr double kGraceSeconds = 25;   // past --seconds: the watchdog's limit (a 10 s timeout fits in it)

// Where the soak is, for the watchdog: written by the test thread before each step, read by the watchdog.
struct SoakProgress {
  std::atomic<int> epoch{0};
  std::atomic<long> call{0};
  std::atomic<const char*> phase{"start"};
  std::mutex mutex;  // guards shape
  std::string shape;
  void set_shape(const std::string& s) {
    std::lock_guard<std::mutex> lock(mutex);
    shape = s;
  }
};

// Ends the process (exit status 1, after printing where the soak is) unless stop() comes first.
class Watchdog {
 public:
  Watchdog(SoakProgress& progress, double limit_seconds)
      : thread_([this, &progress, limit_seconds] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (cv_.wait_for(lock, std::chrono::duration<double>(limit_seconds), [this] { return stopped_; })) return;
          std::string shape;
          {
            std::lock_guard<std::mutex> shape_lock(progress.mutex);
            shape = progress.shape;
          }
          std::printf(
              "[soak] STALLED: still running %.0f s after the start (--seconds + %.0f s): epoch %d (%s), call "
              "%ld, in '%s'. Each cross-rank wait times out after %d ms with a PeerTimeout naming the peer, so "
              "this step is slow or held outside those waits.\n",
              limit_seconds, kGraceSeconds, progress.epoch.load(), shape.c_str(), progress.call.load(),
              progress.phase.load(), kWaitTimeoutMs);
          std::fflush(stdout);
          std::_Exit(1);
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopped_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// The slowest cost seen of each step kind, in seconds: what the next one is assumed to take.
struct StepCosts {
  double setup = 0, call = 0, graph = 0;
};

struct SoakStats {
  long calls = 0, composed_full = 0, composed_sampled = 0, graph_checks = 0, graph_replays = 0;
  long tokens_compared = 0, values_compared = 0, mismatched_values = 0, mismatched_calls = 0, timeouts = 0;
  std::set<std::string> shapes;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename T>
T pick(std::mt19937_64& rng, std::initializer_list<T> values) {
  return *(values.begin() + rng() % values.size());
}

MoeShape random_shape(std::mt19937_64& rng) {
  MoeShape s;
  s.num_ranks = pick(rng, {1, 2, 4});
  s.hidden = 128 * pick(rng, {2, 3, 4, 6, 8});
  s.intermediate = 128 * pick(rng, {1, 2, 3, 4});
  s.num_experts = s.num_ranks * pick(rng, {1, 2, 4, 8});
  s.num_topk = 1 + int(rng() % std::min(plan::kMegaMaxTopk, s.num_experts));
  s.num_max_tokens_per_rank = pick(rng, {8, 32, 128});
  return s;
}

// Bitwise comparison of rows: fused rows `rows_f` of y_f against rows 0.. of y_c; counts mismatched values and
// reports the first mismatches of the call.
long compare_rows(const std::vector<uint16_t>& y_f, const std::vector<int>& rows_f, const std::vector<uint16_t>& y_c,
                  int H, const std::string& what) {
  long bad = 0;
  for (size_t j = 0; j < rows_f.size(); ++j)
    for (int c = 0; c < H; ++c) {
      const uint16_t f = y_f[size_t(rows_f[j]) * H + c], g = y_c[j * H + c];
      if (f == g) continue;
      if (bad < 3)
        ADD_FAILURE() << what << ": token " << rows_f[j] << " channel " << c << ": fused 0x" << std::hex << f
                      << ", composed 0x" << g << std::dec;
      ++bad;
    }
  return bad;
}

// One call: fused on the full batch vs composed on the full batch (even calls) or on sampled tokens (odd calls),
// plus a CUDA-graph check every kGraphEvery calls.
// seconds_left: the time left of --seconds (a graph check is made only where its cost fits).
void soak_call(Setup& s, MegaMoe& mega, std::mt19937_64& rng, SoakStats& st, SoakProgress& progress, StepCosts& costs,
               const std::function<double()>& seconds_left) {
  const int R = s.shape.num_ranks, H = s.shape.hidden;
  Case c;
  const int routing = int(rng() % 5);
  c.kind = routing == 1   ? ref::RoutingKind::kZipf
           : routing == 2 ? ref::RoutingKind::kHotExpert
                          : ref::RoutingKind::kUniform;
  c.mask = routing == 3 ? 0.3 : routing == 4 ? 1.0 : 0.0;
  c.tokens = 1 + int(rng() % s.shape.num_max_tokens_per_rank);
  c.seed = rng();
  const std::string what = "call " + std::to_string(st.calls) + " (" + s.shape.to_string() + ", " + case_name(c) +
                           ", case seed " + std::to_string(c.seed) + ")";
  progress.call = st.calls;
  progress.phase = "inputs";
  Inputs in = make_inputs(s, c);
  for (int i = 0; i < R; ++i) poison(s.devices[i], in.args[i].y, size_t(c.tokens) * H * 2);
  progress.phase = "fused forward";
  mega.forward(in.args);
  mega.synchronize();
  std::vector<std::vector<uint16_t>> fused;
  for (int i = 0; i < R; ++i) fused.push_back(download_bf16(s.devices[i], in.args[i].y, size_t(c.tokens) * H));
  ++st.calls;

  long bad = 0;
  const bool sampled = st.calls % 2 == 0;
  std::vector<std::vector<int>> rows(R);
  std::vector<std::vector<uint16_t>> composed(R);
  progress.phase = sampled ? "composed forward (sampled tokens)" : "composed forward (full batch)";
  if (!sampled) {
    for (auto& r : rows)
      for (int t = 0; t < c.tokens; ++t) r.push_back(t);
    auto args = in.args;
    std::vector<DevMem> ys;
    for (int i = 0; i < R; ++i) {
      ys.emplace_back(s.devices[i], size_t(c.tokens) * H * 2);
      poison(s.devices[i], ys.back().ptr, size_t(c.tokens) * H * 2);
      args[i].y = ys.back().as<uint16_t>();
    }
    s.layer->forward(args);
    s.layer->synchronize();
    for (int i = 0; i < R; ++i) composed[i] = download_bf16(s.devices[i], args[i].y, size_t(c.tokens) * H);
    ++st.composed_full;
  } else {
    // 1..8 distinct tokens per rank (token 1 is the all-masked one of masked routings when T > 1).
    std::vector<ref::MoeLayerInput> sub;
    std::vector<DevMem> x, sf, idx, w, ys;
    std::vector<MoeForwardArgs> args(R);
    for (int i = 0; i < R; ++i) {
      std::vector<int> all(c.tokens);
      for (int t = 0; t < c.tokens; ++t) all[t] = t;
      std::shuffle(all.begin(), all.end(), rng);
      rows[i].assign(all.begin(), all.begin() + std::min<int>(c.tokens, 1 + int(rng() % 8)));
      sub.push_back(ref::select_tokens(in.host[i], rows[i]));
      const int dev = s.devices[i];
      x.push_back(upload(dev, sub[i].x.data));
      sf.push_back(upload(dev, sub[i].x.scales));
      idx.push_back(upload(dev, sub[i].routing.topk_idx));
      w.push_back(upload(dev, sub[i].routing.topk_weights));
      ys.emplace_back(dev, rows[i].size() * H * 2);
      poison(dev, ys.back().ptr, rows[i].size() * H * 2);
      args[i].num_tokens = int(rows[i].size());
      args[i].x = x[i].as<uint8_t>(), args[i].x_scales = sf[i].as<float>();
      args[i].topk_idx = idx[i].as<int64_t>(), args[i].topk_weights = w[i].as<float>();
      args[i].y = ys[i].as<uint16_t>();
    }
    s.layer->forward(args);
    s.layer->synchronize();
    for (int i = 0; i < R; ++i) composed[i] = download_bf16(s.devices[i], args[i].y, rows[i].size() * H);
    ++st.composed_sampled;
  }
  const int K = s.shape.num_topk;
  for (int i = 0; i < R; ++i) {
    bad += compare_rows(fused[i], rows[i], composed[i], H, what + " rank " + std::to_string(i));
    for (int t = 0; t < c.tokens; ++t) {  // all-masked tokens: zeros (checked on every token)
      bool routed = false;
      for (int k = 0; k < K; ++k) routed |= in.host[i].routing.topk_idx[size_t(t) * K + k] >= 0;
      for (int ch = 0; !routed && ch < H; ++ch)
        if (fused[i][size_t(t) * H + ch] != 0) {
          ADD_FAILURE() << what << " rank " << i << ": all-masked token " << t << " has y[" << ch << "] = 0x"
                        << std::hex << fused[i][size_t(t) * H + ch] << std::dec;
          ++bad;
          break;
        }
    }
    st.tokens_compared += long(rows[i].size());
    st.values_compared += long(rows[i].size()) * H;
  }

  if (st.calls % kGraphEvery == 0 && bad == 0 && costs.graph <= seconds_left()) {
    progress.phase = "CUDA-graph capture and replays";
    const auto t0 = std::chrono::steady_clock::now();
    const bool before = ::testing::Test::HasFailure();
    expect_graph_replays_bitwise(
        s, in, fused, [&] { mega.forward(in.args); }, kGraphReplays);
    ++st.graph_checks, st.graph_replays += kGraphReplays;
    if (!before && ::testing::Test::HasFailure()) ++bad;  // expect_graph_replays_bitwise reported the values
    costs.graph = std::max(costs.graph, seconds_since(t0));
  }
  progress.phase = "between calls";
  st.mismatched_values += bad;
  st.mismatched_calls += bad > 0;
}

TEST(Soak, FusedAndEpMatchComposedOnRandomShapes) {
  const double budget = test::option_seconds() > 0 ? test::option_seconds() : kDefaultSeconds;
  const double epoch_seconds = std::max(2.0, budget / 8);  // ~8 shapes per soak
  SoakStats st;
  SoakProgress progress;
  StepCosts costs;
  const auto t0 = std::chrono::steady_clock::now();
  const std::function<double()> left = [&] { return budget - seconds_since(t0); };
  Watchdog watchdog(progress, budget + kGraceSeconds);
  bool out_of_time = false;  // a next shape would not have fit
  for (int epoch = 0; left() > 0 && !HasFailure(); ++epoch) {
    // A new shape only when its setup and teardown and one call fit (the first always runs).
    if (epoch > 0 && costs.setup + costs.call > left()) {
      out_of_time = true;
      break;
    }
    // Epoch e's shape and its calls' inputs come from the e-th seed of this test (SYMMOE_TEST_SEED reproduces them;
    // only how many calls fit in an epoch depends on time).
    const uint64_t epoch_seed = fresh_seed();
    std::mt19937_64 rng(epoch_seed);
    SCOPED_TRACE("epoch " + std::to_string(epoch) + " (seed " + std::to_string(epoch_seed) + ")");
    const MoeShape shape = random_shape(rng);
    const int alignment = pick(rng, {1, 64, 128});
    const float clamp = pick(rng, {0.f, 0.f, 2.f});
    progress.epoch = epoch;
    progress.set_shape(shape.to_string());
    progress.phase = "setup: weights and the composed layer";
    const auto setup_t0 = std::chrono::steady_clock::now();
    double setup_seconds = 0;
    auto teardown_t0 = setup_t0;
    {
      auto s = make_setup(shape, /*from_host=*/false, alignment, clamp, /*all_experts=*/false, kWaitTimeoutMs);
      MegaMoeOptions o;
      o.clamp = clamp;
      progress.phase = "setup: the fused layer";
      MegaMoe mega(*s->comm, s->shape, s->store.views(), o);
      setup_seconds = seconds_since(setup_t0);
      st.shapes.insert(shape.to_string());
      const double epoch_end = std::min(budget, seconds_since(t0) + epoch_seconds);
      try {
        do {  // at least one call per shape, however slow the setup (sanitizers)
          const auto call_t0 = std::chrono::steady_clock::now();
          soak_call(*s, mega, rng, st, progress, costs, left);
          costs.call = std::max(costs.call, seconds_since(call_t0));
        } while (seconds_since(t0) + costs.call < epoch_end && !HasFailure());
      } catch (const PeerTimeout& e) {
        ++st.timeouts;
        ADD_FAILURE() << "hang after " << st.calls << " calls (in '" << progress.phase.load() << "'): " << e.what();
        s->comm->reset_sync_state();
      } catch (const Error& e) {  // a device-detected input error or a host check: the layers disagree on the input
        ADD_FAILURE() << "error after " << st.calls << " calls (in '" << progress.phase.load() << "'): " << e.what();
      }
      progress.phase = "teardown: freeing the layers";  // at the end of this scope
      teardown_t0 = std::chrono::steady_clock::now();
    }
    costs.setup = std::max(costs.setup, setup_seconds + seconds_since(teardown_t0));  // a shape's fixed cost
  }
  progress.phase = "summary";
  std::printf(
      "[soak] %.1f s: %ld fused calls (%ld composed full-batch, %ld composed on sampled tokens), %ld tokens / "
      "%ld values compared, %ld graph checks (%ld replays), %zu shapes; mismatches: %ld values in %ld calls; "
      "timeouts: %ld; slowest setup %.1f s, call %.2f s, graph check %.2f s%s\n",
      seconds_since(t0), st.calls, st.composed_full, st.composed_sampled, st.tokens_compared, st.values_compared,
      st.graph_checks, st.graph_replays, st.shapes.size(), st.mismatched_values, st.mismatched_calls, st.timeouts,
      costs.setup, costs.call, costs.graph, out_of_time ? " (no time left for another shape)" : "");
  EXPECT_GT(st.calls, 0);
  EXPECT_EQ(st.mismatched_values, 0);
  EXPECT_EQ(st.timeouts, 0);
}

}  // namespace
}  // namespace symmoe
