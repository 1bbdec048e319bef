// `symmoe run`: one MoE layer across R ranks, end to end, with its checks.
//
// CPU path (no GPU, or --cpu): the golden model (src/reference) on R simulated ranks: random FP8 inputs and
// routing -> dispatch (expand) -> per-expert MLP -> combine, plus the direct per-token formula and the fp64 exact
// model. Prints the shape, per-stage timings and every check; exits 1 when a check fails.
// GPU path (a GPU visible and no --cpu): the MoE layer on all visible GPUs as ranks (in-process; --ranks asks for
// virtual ranks), checked against the golden model on sampled tokens, timed (tools/cli/run_gpu.cpp). --layer picks
// the layer: fused (default: MegaMoe, include/symmoe/mega_moe.hpp, also checked bitwise against one composed call)
// or composed (include/symmoe/moe.hpp).
// Defaults there: --shape flash, one rank per GPU, 512 tokens, alignment 128.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cli_common/command.hpp"
#include "cli_common/gpu_probe.hpp"
#include "cli_common/limits.hpp"
#include "cli_common/shape_flags.hpp"
#include "cli/progress.hpp"
#include "cli/run_gpu.hpp"
#include "symmoe/activation_clamp.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/reference/mlp.hpp"
#include "symmoe/shape.hpp"

namespace {

using namespace symmoe;

struct RunOptions {
  MoeShape shape;
  std::string shape_name;
  ref::RoutingOptions routing;
  int alignment = 1;
  float clamp = 0.f;  // swiglu_weighted's (0: off), from --clamp (DeepGEMM's activation_clamp)
};

// Stage timings and checks, printed as one table at the end.
class Report {
 public:
  template <typename F>
  auto time(const std::string& stage, F&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    auto result = [&] {
      cli::StageProgress progress(stage);  // a live line on a terminal for stages that take seconds
      return fn();
    }();
    stages_.push_back(
        {stage, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()});
    return result;
  }
  void check(const std::string& name, bool ok, const std::string& detail) { checks_.push_back({name, ok, detail}); }
  bool all_ok() const {
    for (const auto& c : checks_)
      if (!c.ok) return false;
    return true;
  }
  void print() const {
    std::printf("\n  %-34s %10s\n", "stage (CPU golden model)", "ms");
    for (const auto& s : stages_) std::printf("  %-34s %10.2f\n", s.name.c_str(), s.ms);
    std::printf("\n  %-44s %-5s %s\n", "check", "", "detail");
    for (const auto& c : checks_)
      std::printf("  %-44s %-5s %s\n", c.name.c_str(), c.ok ? "ok" : "FAIL", c.detail.c_str());
    std::printf("\n%s\n", all_ok() ? "all checks passed" : "SOME CHECKS FAILED");
  }

 private:
  struct Stage {
    std::string name;
    double ms;
  };
  struct Check {
    std::string name;
    bool ok;
    std::string detail;
  };
  std::vector<Stage> stages_;
  std::vector<Check> checks_;
};

std::vector<ref::EpHandle> handles_of(const std::vector<ref::DispatchOutput>& outputs) {
  std::vector<ref::EpHandle> h;
  for (const auto& o : outputs) h.push_back(o.handle);
  return h;
}

bool same_outputs(const std::vector<ref::DispatchOutput>& a, const std::vector<ref::DispatchOutput>& b) {
  for (size_t d = 0; d < a.size(); ++d) {
    const auto &x = a[d], &y = b[d];
    if (x.recv_x != y.recv_x || x.recv_sf != y.recv_sf || x.recv_topk_idx != y.recv_topk_idx ||
        x.handle.recv_src_metadata != y.handle.recv_src_metadata ||
        x.handle.dst_buffer_slot_idx != y.handle.dst_buffer_slot_idx ||
        x.handle.psum_num_recv_tokens_per_expert != y.handle.psum_num_recv_tokens_per_expert)
      return false;
    for (size_t i = 0; i < x.recv_topk_weights.size(); ++i)
      if (fmt::float_as_bits(x.recv_topk_weights[i]) != fmt::float_as_bits(y.recv_topk_weights[i])) return false;
  }
  return true;
}

std::string first_difference(const std::vector<std::vector<uint16_t>>& a, const std::vector<std::vector<uint16_t>>& b,
                             int hidden) {
  for (size_t r = 0; r < a.size(); ++r)
    for (size_t i = 0; i < a[r].size(); ++i)
      if (a[r][i] != b[r][i])
        return detail::concat("first difference: rank ", r, " token ", i / hidden, " col ", i % hidden, ": formula ",
                              fmt::bf16_to_float(a[r][i]), " composed ", fmt::bf16_to_float(b[r][i]));
  return "bitwise equal";
}

// The kernel-faithful formula against the fp64 exact model (relative Frobenius error over every rank's y).
void check_vs_exact(Report& report, const std::vector<std::vector<uint16_t>>& formula,
                    const std::vector<std::vector<double>>& exact) {
  double num = 0, den = 0, values = 0, formula_sq = 0;
  for (size_t r = 0; r < exact.size(); ++r)
    for (size_t i = 0; i < exact[r].size(); ++i) {
      const double f = fmt::bf16_to_float(formula[r][i]), d = f - exact[r][i];
      num += d * d, den += exact[r][i] * exact[r][i], formula_sq += f * f, ++values;
    }
  // An exact y below bf16's smallest subnormal (2^-133) everywhere is a zero layer in bf16 (--clamp 0: every
  // activation is 0; the exact model's clamp at the smallest float leaves ~1e-46): the formula's y must be zero.
  const bool zero_layer = den <= values * std::ldexp(1.0, -266);
  const double err = zero_layer ? (formula_sq > 0 ? INFINITY : 0.0)
                     : den > 0  ? std::sqrt(num / den)
                                : (num > 0 ? INFINITY : 0.0);
  // NOTES: ~2.7% is the e4m3 re-quantisation of the L1 output (3 mantissa bits), see test_reference_mlp.cpp.
  report.check("faithful vs exact, rel. Frobenius < 5e-2", err < 5e-2,
               detail::concat(err, " (expected ~0.027 from e4m3 L2 input)"));
}

// Shape and traffic summary.
void print_summary(const MoeShape& shape, const std::vector<ref::MoeLayerInput>& inputs,
                   const std::vector<ref::DispatchOutput>& dispatched, size_t experts_touched) {
  const int R = shape.num_ranks;
  long long pairs = 0, recv_rows = 0, expanded_rows = 0, all_masked = 0;
  int max_expanded = 0, min_expanded = 1 << 30;
  for (int r = 0; r < R; ++r) {
    const auto& h = dispatched[r].handle;
    recv_rows += h.num_recv_tokens, expanded_rows += h.num_expanded_tokens;
    max_expanded = std::max(max_expanded, h.num_expanded_tokens),
    min_expanded = std::min(min_expanded, h.num_expanded_tokens);
    for (int t = 0; t < inputs[r].routing.num_tokens; ++t) {
      bool any = false;
      for (int k = 0; k < shape.num_topk; ++k) any |= inputs[r].routing.topk_idx[size_t(t) * shape.num_topk + k] >= 0;
      all_masked += !any;
    }
    for (const int64_t e : inputs[r].routing.topk_idx) pairs += e >= 0;
  }
  std::printf("  routed (token, expert) pairs %lld, all-masked tokens %lld, experts touched %zu of %d\n", pairs,
              all_masked, experts_touched, shape.num_experts);
  std::printf("  received rows %lld (non-expand), expanded rows %lld (incl. padding), per rank min/max %d/%d\n",
              recv_rows, expanded_rows, min_expanded, max_expanded);
}

int run_cpu_path(const RunOptions& o) {
  const MoeShape& shape = o.shape;
  const int R = shape.num_ranks;
  Report report;

  const auto inputs = report.time("inputs (x FP8 per-128, routing)", [&] {
    std::vector<ref::MoeLayerInput> in;
    for (int r = 0; r < R; ++r)
      in.push_back(ref::make_random_layer_input(shape, shape.num_max_tokens_per_rank, o.routing, r));
    return in;
  });
  std::vector<ref::Routing> routings;
  for (const auto& in : inputs) routings.push_back(in.routing);
  const auto weights = report.time("expert weights (routed experts)", [&] {
    return ref::make_random_experts(shape.hidden, shape.intermediate, routings, o.routing.seed);
  });

  ref::DispatchConfig config;
  config.num_ranks = R, config.num_experts = shape.num_experts, config.num_topk = shape.num_topk;
  config.num_max_tokens_per_rank = shape.num_max_tokens_per_rank, config.expert_alignment = o.alignment;
  std::vector<ref::DispatchInput> dispatch_inputs;
  for (const auto& in : inputs) dispatch_inputs.push_back(ref::make_dispatch_input(in));

  // Non-expand dispatch: metadata only (the layer uses expand).
  const auto plain = report.time("dispatch (non-expand)", [&] { return ref::dispatch(config, dispatch_inputs); });
  const std::string plain_problems = ref::check_dispatch(config, dispatch_inputs, plain);
  report.check("dispatch metadata invariants (non-expand)", plain_problems.empty(),
               plain_problems.empty() ? "slots, prefix sums, row order, payload rows" : plain_problems);

  config.do_expand = true;
  const auto dispatched = report.time("dispatch (expand)", [&] { return ref::dispatch(config, dispatch_inputs); });
  const std::string problems = ref::check_dispatch(config, dispatch_inputs, dispatched);
  report.check(
      "dispatch metadata invariants (expand)", problems.empty(),
      problems.empty() ? detail::concat("aligned segments (alignment ", o.alignment, "), expand rows") : problems);
  const auto cached = report.time("cached dispatch (expand)",
                                  [&] { return ref::dispatch_cached(handles_of(dispatched), dispatch_inputs); });
  report.check("cached dispatch == dispatch (bitwise)", same_outputs(dispatched, cached), "rows, weights, metadata");

  const auto expert_out = report.time("expert MLP (faithful, composed)",
                                      [&] { return ref::run_local_experts(shape, weights, dispatched, o.clamp); });
  const auto combined =
      report.time("combine", [&] { return ref::combine(handles_of(dispatched), shape.hidden, expert_out); });
  std::vector<std::vector<uint16_t>> composed;
  for (const auto& c : combined) composed.push_back(c.combined_x);

  const auto formula = report.time("fused formula (faithful, per token)",
                                   [&] { return ref::moe_forward_faithful(shape, weights, inputs, o.clamp); });
  const std::string diff = first_difference(formula, composed, shape.hidden);
  report.check("composed path == fused formula (bitwise)", diff == "bitwise equal", diff);

  const auto exact =
      report.time("exact model (fp64)", [&] { return ref::moe_forward_exact(shape, weights, inputs, o.clamp); });
  check_vs_exact(report, formula, exact);

  print_summary(shape, inputs, dispatched, weights.size());
  report.print();
  return report.all_ok() ? 0 : 1;
}

// The composed or fused layer on the GPUs (tools/cli/run_gpu.cpp).
int run_gpu_path(const RunOptions& o, int check_tokens, int reps, bool fused) {
  cli::GpuRunOptions g;
  g.shape = o.shape, g.shape_name = o.shape_name, g.routing = o.routing, g.alignment = o.alignment;
  g.clamp = o.clamp, g.check_tokens = check_tokens, g.reps = reps, g.fused = fused;
  return cli::run_gpu_layer(g);
}

int run_layer(int argc, char** argv) {
  cli::Args args("run", "Run one MoE layer across R ranks and check it (the CPU golden model where no GPU is used).");
  cli::add_shape_flags(
      args, {.shape = "tiny",
             .shape_help = "model shape preset (the large ones on the CPU: use few tokens; GPU default flash)",
             .ranks = "4",
             .ranks_help = "number of (simulated) EP ranks R (GPU default: one per visible GPU; more = virtual ranks)",
             .tokens = "16",
             .tokens_help = "tokens per rank (= num_max_tokens_per_rank; GPU default 512)"})
      .option("routing", "uniform", "routing generator")
      .choices({"uniform", "zipf", "hot"})
      .option("mask", "0", "probability that a top-k lane is masked (-1)")
      .real_range(0, 1)
      .option("zipf-s", "1.2", "Zipf exponent for --routing zipf (0: uniform)")
      .real_range(0, cli::kMaxZipfExponent)
      .option("hot-expert", "0", "the hot expert for --routing hot (< the shape's E)")
      .int_range(0, std::numeric_limits<int>::max())
      .option("hot-fraction", "0.5", "fraction of tokens routed to the hot expert")
      .real_range(0, 1)
      .option("seed", "1", "seed of inputs, routing and weights")
      .int_range(0, std::numeric_limits<int>::max())
      .option("alignment", "1", "expert alignment of the expand layout (GPU default 128)")
      .int_range(1, 1024)
      .option("clamp", "",
              "SwiGLU activation clamp c, DeepGEMM's activation_clamp: gate <= c, up in [-c, c] (0: every "
              "activation 0); not given: no clamp")
      .real_range(0, 1e30)
      .option("check-tokens", "4", "GPU path: tokens per rank compared with the golden model")
      .int_range(1, cli::kMaxTokensPerRank)
      .option("reps", "20", "GPU path: timed repetitions (CUDA-graph replays)")
      .int_range(1, 100000)
      .option("layer", "fused",
              "GPU path: fused (single kernel, also checked bitwise against composed) | composed "
              "(pipeline of kernels)")
      .choices({"fused", "composed"})
      .flag("cpu", "run the CPU golden model even where a GPU is available");
  if (!args.parse(argc, argv)) return 0;
  const std::string layer = args.str("layer");
  const int num_gpus = args.has("cpu") ? 0 : cli::visible_gpu_count();
  const bool use_gpu = num_gpus > 0;
  // GPU defaults where a flag is not given: flash, one rank per GPU, 512 tokens, alignment 128.
  const auto pick = [&](const std::string& name, int gpu_default) {
    return use_gpu && !args.has(name) ? gpu_default : args.integer(name);
  };
  RunOptions o;
  const cli::ModelShape model =
      cli::read_model_shape(args, use_gpu ? "flash" : "tiny", pick("ranks", num_gpus), pick("tokens", 512));
  o.shape = model.shape, o.shape_name = model.name;
  if (use_gpu) {  // before any GPU work: the composed layer always runs (the fused one's bitwise reference)
    const int num_sms = cli::gpu_limits().num_sms;
    cli::require_layer_plans("symmoe run", model, cli::Layer::kComposed, plan::GemmWeights::kFp8, num_sms);
    if (layer == "fused")
      cli::require_layer_plans("symmoe run --layer fused", model, cli::Layer::kFused, plan::GemmWeights::kFp8, num_sms);
  }
  o.routing.kind = ref::parse_routing_kind(args.str("routing"));
  o.routing.mask_prob = args.real("mask");
  o.routing.zipf_s = args.real("zipf-s");
  o.routing.hot_expert = args.integer("hot-expert");
  o.routing.hot_fraction = args.real("hot-fraction");
  o.routing.seed = uint64_t(args.integer("seed"));
  o.alignment = pick("alignment", 128);
  o.clamp = args.has("clamp") ? swiglu_clamp_for_activation_clamp(float(args.real("clamp"))) : 0.f;
  SYMMOE_CHECK(o.routing.hot_expert < o.shape.num_experts, "cli",
               "symmoe run: --hot-expert must be < E = ", o.shape.num_experts, " of shape ", o.shape_name, ", got ",
               o.routing.hot_expert);

  std::printf("symmoe run: shape %s (%s), routing %s, mask %g, seed %llu, alignment %d, clamp %s\n",
              o.shape_name.c_str(), o.shape.to_string().c_str(), ref::routing_kind_name(o.routing.kind),
              o.routing.mask_prob, (unsigned long long)o.routing.seed, o.alignment,
              args.has("clamp") ? args.str("clamp").c_str() : "none");
  if (!use_gpu && o.shape.hidden > 1024)
    std::printf("  note: %s on the CPU costs ~%.0f M multiply-adds per routed pair and mode; keep --tokens small\n",
                o.shape_name.c_str(), 3.0 * o.shape.hidden * o.shape.intermediate / 1e6);
  if (use_gpu) return run_gpu_path(o, args.integer("check-tokens"), args.integer("reps"), layer == "fused");
  std::printf("%s\n", args.has("cpu") ? "CPU path (--cpu)" : "CPU path (no GPU visible)");
  if (args.has("layer")) std::printf("  note: --layer %s applies to the GPU path only\n", layer.c_str());
  return run_cpu_path(o);
}

}  // namespace

SYMMOE_CLI_COMMAND(run, "run",
                   "run one MoE layer across R ranks with its checks (GPUs: fused, or --layer composed; else CPU)",
                   run_layer);
