// `symmoe bench moe`: the MoE layer on every visible GPU as ranks (in-process; --ranks for virtual ranks), same
// weights and inputs for both implementations (--layers, default both):
//   composed ("op": "composed")  EP dispatch expand -> grouped GEMM L1 + SwiGLU/FP8 -> grouped GEMM L2 -> EP combine
//                                (include/symmoe/moe.hpp), with its stage breakdown measured in the same run;
//   fused    ("op": "fused")     the single persistent kernel per rank (MegaMoe, include/symmoe/mega_moe.hpp), timed
//                                on inputs staged in its workspace in place (no copy-in, like the composed layer);
//                                speedup_vs_composed = composed time / fused time of this run. Before timing, its y
//                                is compared with the composed y bitwise (bitwise_equal_composed; a mismatch is
//                                printed and recorded, the bench goes on). The composed layer is always built (the
//                                check needs it), timed only when listed.
// Weights (--weights, default fp8): each listed format gets its own synthetic weights and composed layer, timed on
// the same inputs one after the other (field "weights"): fp8 = synthetic weights generated on the GPUs; fp4 =
// synthetic FP4 E2M1 weights (MoeWeightStore::synthetic_fp4: generated on the host, UE8M0 codes per 32 columns),
// timed in both layers (one fused layer, its weights rebound per format: MegaMoe::bind_weights re-plans for FP4's
// kernel). The two formats hold different synthetic weights, so their y are not compared with each other; each
// format's fused y is compared bitwise with its composed y.
// Inputs: FP8 x (per-128 fp32 scales), routing from ref::make_routing.
// Metrics (docs/design.md §10.2), for rank 0 (the rank whose stream is timed; the layer is collective), both layers:
//   tflops      2 * recv_pairs * H * I * 3 / t, recv_pairs = (token, expert) pairs rank 0 computes
//   hbm_gbps    (touched local experts' weights incl. scales (FP4: + codes, data at half a byte per weight)
//               + recv_pairs * (H + 4H/128) FP8 rows in
//               + recv_pairs * 2H bf16 rows out) / t — the layer's minimum traffic, not every intermediate
//   weight_gbps touched local experts' weights incl. scales / t, and weight_fraction_of_ceiling against
//               hbm_ceiling_gbps: a streaming read of 4 GiB on GPU 0 measured at the start of the same run
//               (bench/hbm_ceiling.hpp)
//   nvl_gbps    bytes rank 0 exchanges with OTHER ranks (dispatch: token records it receives, x + scales + K
//               idx/weights; combine: bf16 rows it sends back) / t
//   stage times dispatch / l1 (glue + L1) / l2 / combine, each timed alone on the data the previous stage left
// Times: medians of CUDA-graph replays (src/cli_common/timing.hpp), host launch overhead excluded.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench.hpp"
#include "cli_common/limits.hpp"
#include "cli_common/moe_inputs.hpp"
#include "cli_common/shape_flags.hpp"
#include "hbm_ceiling.hpp"
#include "kernels/mega/trace_format.hpp"
#include "moe/layer_check.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/mega_moe.hpp"
#include "symmoe/moe.hpp"
#include "symmoe/moe_weights.hpp"
#include "symmoe/reference/routing.hpp"

namespace symmoe::bench {
namespace {

struct Row {
  gemm::WeightFormat weights = gemm::WeightFormat::kFp8;
  int tokens = 0;
  cli::RankTraffic traffic;
  double forward_us = 0, dispatch_us = 0, l1_us = 0, l2_us = 0, combine_us = 0;  // composed (0: not timed)
  double fused_us = 0;                                                           // 0: not timed
  bool fused_equal = false;
};

const char* format_name(gemm::WeightFormat f) { return f == gemm::WeightFormat::kFp4 ? "fp4" : "fp8"; }

// min / median / max of x (sorted here), "-" when empty.
std::string spread(std::vector<double> x) {
  if (x.empty()) return "         -          -          -";
  std::sort(x.begin(), x.end());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%10.1f %10.1f %10.1f", x.front(), x[x.size() / 2], x.back());
  return buf;
}

// Every CTA's trace words as CSV: stamps in us from `start` (0 where not stamped), counts as they are.
void write_trace_csv(const std::string& raw_path, const std::vector<unsigned long long>& v, int num_ctas,
                     unsigned long long start) {
  using namespace mega;
  const auto word = [&](int cta, int i) { return v[size_t(cta) * kTraceWordsPerCta + i]; };
  std::FILE* f = std::fopen(raw_path.c_str(), "w");
  SYMMOE_CHECK(f != nullptr, "bench", "--trace-raw: cannot write '", raw_path, "'");
  std::fprintf(f, "cta");
  for (int i = 0; i < kTraceWordsPerCta; ++i)
    if (i < kNumTracePoints)
      std::fprintf(f, ",%s", kTracePointNames[i]);
    else
      std::fprintf(f, ",tile%d_w%d", (i - kNumTracePoints) / kTraceTileWords, (i - kNumTracePoints) % kTraceTileWords);
  std::fprintf(f, "\n");
  for (int c = 0; c < num_ctas; ++c) {
    std::fprintf(f, "%d", c);
    for (int i = 0; i < kTraceWordsPerCta; ++i) {
      const unsigned long long raw = word(c, i);
      const bool stamp = i < kNumTracePoints ? i != kTraceNumTiles && i != kTraceProducerWaitNs
                                             : (i - kNumTracePoints) % kTraceTileWords != kTileId;
      if (!stamp)
        std::fprintf(f, ",%llu", raw);
      else
        std::fprintf(f, ",%.2f", raw == 0 ? 0.0 : (raw - start) / 1e3);
    }
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

// One traced fused call, the last of a CUDA graph of 3 (as timed: no launch skew between the ranks): rank 0's
// per-CTA stage stamps as min / median / max over the CTAs, in us from the earliest kernel entry (the producer's
// summed wait in us, tiles as counts); then the CTAs' first tiles: the producer's wait for the rows, the time from
// rows-ready to its last load, and the weight bytes of the k-blocks loaded in that time over it (one SM's weight
// stream; the first kNumStages k-blocks are issued at once, some of their weights before rows-ready, so they count as
// loaded at rows-ready), and the math warps' epilogue (mainloop done -> epilogue and its signal done).
// With raw_path set, also every CTA's words as CSV (stamps in us from the earliest entry, 0 where not stamped).
void print_trace(Communicator& comm, MegaMoe& fused, const std::vector<MoeForwardArgs>& margs, int T,
                 const MoeShape& shape, const std::string& raw_path) {
  using namespace mega;
  fused.set_trace(true);
  graph_time_all_ranks_us(
      comm, [&] { fused.forward(margs); }, 3, 1);
  fused.synchronize();
  const std::vector<unsigned long long> v = fused.trace(0);
  fused.set_trace(false);
  const int num_ctas = int(v.size()) / kTraceWordsPerCta;
  const auto word = [&](int cta, int i) { return v[size_t(cta) * kTraceWordsPerCta + i]; };
  unsigned long long start = ~0ull;
  for (int c = 0; c < num_ctas; ++c) start = std::min(start, word(c, kTraceStart));
  if (!raw_path.empty()) write_trace_csv(raw_path, v, num_ctas, start);
  const plan::MegaPlan& plan = fused.plan_for_tokens(0, T);
  std::printf("trace tokens %d, rank 0, %d CTAs, BLOCK_M %d: point min / median / max\n", T, num_ctas, plan.block_m);
  for (int point = 0; point < kNumTracePoints; ++point) {
    std::vector<double> x;
    for (int c = 0; c < num_ctas; ++c) {
      const unsigned long long raw = word(c, point);
      if (point == kTraceNumTiles)
        x.push_back(double(raw));
      else if (point == kTraceProducerWaitNs)
        x.push_back(raw / 1e3);
      else if (raw != 0)
        x.push_back((raw - start) / 1e3);
    }
    std::printf("  %-18s %s\n", kTracePointNames[point], spread(x).c_str());
  }
  for (int l2 = 0; l2 < 2; ++l2) {
    // B bytes (FP8) of the k-blocks after the first kNumStages (those wait for a stage the math warps freed)
    const int k_blocks = (l2 ? shape.intermediate : shape.hidden) / 128;
    const double weight_bytes =
        double(l2 ? plan.l2_block_n : plan.l1_block_n) * 128 * std::max(k_blocks - plan.num_stages, 0);
    std::vector<double> wait, run, gbps, epilogue;
    for (int c = 0; c < num_ctas; ++c)
      for (int s = 0; s < int(std::min<unsigned long long>(word(c, kTraceNumTiles), kTraceTileSlots)); ++s) {
        const auto tile = [&](int w) { return word(c, kNumTracePoints + s * kTraceTileWords + w); };
        if (int(tile(kTileId) & 1) != l2 || tile(kTileLoadsIssued) == 0) continue;
        wait.push_back((tile(kTileInputsReady) - tile(kTileWaitStart)) / 1e3);
        const double us = (tile(kTileLoadsIssued) - tile(kTileInputsReady)) / 1e3;
        run.push_back(us);
        gbps.push_back(weight_bytes / us / 1e3);
        if (tile(kTileMathDone) != 0 && tile(kTileMainloopDone) != 0)
          epilogue.push_back((tile(kTileMathDone) - tile(kTileMainloopDone)) / 1e3);
      }
    std::printf(
        "  %s tiles (%zu of the CTAs' first %d): wait_us %s | ready->last load us %s | weight GB/s per SM %s"
        " | epilogue us %s\n",
        l2 ? "L2" : "L1", run.size(), kTraceTileSlots, spread(wait).c_str(), spread(run).c_str(), spread(gbps).c_str(),
        spread(epilogue).c_str());
  }
}

// The flags, read once (after the GPU check, as every bench).
struct MoeBenchConfig {
  std::string out, routing, trace_raw;
  cli::ModelShape model;  // at one rank and one token (set_up gives it the run's ranks and tokens)
  std::vector<int> token_list;
  std::vector<gemm::WeightFormat> formats;  // --weights, in the order given
  bool time_composed = false, time_fused = false, trace = false;
  int reps = 0, ranks = 0, alignment = 0, ep_sms = 0;
  uint64_t seed = 0;
};

void declare_flags(cli::Args& args) {
  cli::add_model_shape_flags(args, "flash", "model shape preset")
      .option("out", "bench/results", "directory of the JSON-lines result file")
      .option("tokens", "1,8,32,128,512,2048,8192", "tokens per rank")
      .list_range(1, cli::kMaxTokensPerRank)
      .option("layers", "composed,fused", "layers to time: composed | fused | composed,fused")
      .option("weights", "fp8",
              "comma list of weight formats, each with its own synthetic weights and composed layer, timed in the "
              "same run (JSON field 'weights'): fp8, fp4 (E2M1 + UE8M0 per 32)")
      .option("ranks", "0", "EP ranks (0: one per visible GPU; more: virtual ranks, round-robin over the GPUs)")
      .int_range(0, cli::kMaxRanks)
      .option("routing", "uniform", "uniform | zipf | hot")
      .option("alignment", "128", "expert alignment of the expand layout")
      .option("ep-sms", "0", "CTAs of dispatch/combine per rank (0: the EP plan)")
      .option("reps", "20", "timed repetitions per point")
      .int_range(1, 100000)
      .option("seed", "1", "seed of weights, inputs and routing")
      .flag("trace",
            "fused: after timing, one traced call; print rank 0's stage timeline (kernels/mega/trace_format.hpp)")
      .option("trace-raw", "", "with --trace: directory for every CTA's raw stamps, trace-<shape>-<tokens>.csv");
}

MoeBenchConfig read_config(const cli::Args& args) {
  MoeBenchConfig c;
  c.out = args.str("out");
  c.model = cli::read_model_shape(args, "flash", 1, 1);
  c.token_list = args.int_list("tokens");
  SYMMOE_CHECK(!c.token_list.empty(), "bench", "--tokens is empty");
  for (const auto& l : args.str_list("layers")) {
    SYMMOE_CHECK(l == "composed" || l == "fused", "bench", "--layers: unknown layer '", l,
                 "' (composed | fused | composed,fused)");
    (l == "composed" ? c.time_composed : c.time_fused) = true;
  }
  SYMMOE_CHECK(c.time_composed || c.time_fused, "bench", "--layers is empty");
  for (const auto& w : args.str_list("weights")) {
    SYMMOE_CHECK(w == "fp8" || w == "fp4", "bench", "--weights: unknown format '", w, "' (fp8, fp4)");
    const gemm::WeightFormat f = w == "fp4" ? gemm::WeightFormat::kFp4 : gemm::WeightFormat::kFp8;
    SYMMOE_CHECK(std::find(c.formats.begin(), c.formats.end(), f) == c.formats.end(), "bench", "--weights: '", w,
                 "' given twice");
    c.formats.push_back(f);
  }
  SYMMOE_CHECK(!c.formats.empty(), "bench", "--weights is empty");
  c.reps = args.integer("reps");
  c.seed = uint64_t(args.integer("seed"));
  c.ranks = args.integer("ranks");
  c.routing = args.str("routing");
  c.alignment = args.integer("alignment"), c.ep_sms = args.integer("ep-sms");
  c.trace = args.has("trace"), c.trace_raw = args.str("trace-raw");
  return c;
}

// One weight format of the run: its synthetic weights and the composed layer on them.
struct LayerVariant {
  gemm::WeightFormat format = gemm::WeightFormat::kFp8;
  MoeWeightStore store;
  std::unique_ptr<ComposedMoe> layer;
};

// Everything the points of one run share: the composed layer per weight format (FP8's is also the fused layer's
// bitwise reference), their synthetic weights, the input buffers and the same-run HBM ceiling.
struct MoeBench {
  MoeBenchConfig config;
  int argc = 0;
  char** argv = nullptr;
  int num_gpus = 0, R = 0, sms = 0;
  MoeShape shape;
  double hbm_ceiling = 0;
  std::unique_ptr<Communicator> comm;
  ComposedMoeOptions opt;
  std::vector<LayerVariant> variants;  // config.formats order
  std::unique_ptr<MegaMoe> fused;      // null unless fused is timed (bound to each variant's weights in turn)
  std::unique_ptr<cli::DeviceLayerInputs> inputs;
  ref::RoutingOptions ro;
};

void set_up(MoeBench& b) {
  const MoeBenchConfig& c = b.config;
  SYMMOE_CUDA_CHECK(cudaGetDeviceCount(&b.num_gpus));
  SYMMOE_CHECK(b.num_gpus >= 1, "bench", "bench moe needs a GPU");
  b.R = c.ranks > 0 ? c.ranks : b.num_gpus;
  const int T_max = *std::max_element(c.token_list.begin(), c.token_list.end());
  b.shape = c.model.shape;
  b.shape.num_ranks = b.R, b.shape.num_max_tokens_per_rank = T_max;
  b.shape.validate();
  const cli::ModelShape model{b.shape, c.model.name};
  const int num_sms = cli::gpu_limits().num_sms;
  for (const gemm::WeightFormat f : c.formats) {  // before any GPU work; the composed layer is always built
    const plan::GemmWeights w = f == gemm::WeightFormat::kFp4 ? plan::GemmWeights::kFp4 : plan::GemmWeights::kFp8;
    cli::require_layer_plans("symmoe bench moe", model, cli::Layer::kComposed, w, num_sms);
    if (c.time_fused) cli::require_layer_plans("symmoe bench moe", model, cli::Layer::kFused, w, num_sms);
  }
  SYMMOE_CUDA_CHECK(cudaSetDevice(0));
  b.hbm_ceiling = hbm_read_ceiling_gbps();  // rank 0's GPU, before the layers take their memory
  std::printf("HBM streaming-read ceiling (same run, GPU 0): %.0f GB/s\n", b.hbm_ceiling);
  b.comm = Communicator::in_process(b.R);
  b.opt.expert_alignment = c.alignment, b.opt.ep_sms = c.ep_sms;
  for (const gemm::WeightFormat f : c.formats) {
    std::printf("bench moe: %s (%s), %d ranks on %d GPUs, synthetic %s weights (%.2f GB per rank)\n",
                c.model.name.c_str(), b.shape.to_string().c_str(), b.R, b.num_gpus, format_name(f),
                double(MoeWeightStore::expert_bytes(b.shape, f)) * b.shape.num_local_experts() / 1e9);
    LayerVariant v;
    v.format = f;
    v.store = f == gemm::WeightFormat::kFp4 ? MoeWeightStore::synthetic_fp4(*b.comm, b.shape, c.seed)
                                            : MoeWeightStore::synthetic(*b.comm, b.shape, c.seed);
    v.layer = std::make_unique<ComposedMoe>(*b.comm, b.shape, v.store.views(), b.opt);
    b.variants.push_back(std::move(v));
  }
  if (c.time_fused) {
    b.fused = std::make_unique<MegaMoe>(*b.comm, b.shape, b.variants[0].store.views());
  }
  b.inputs = std::make_unique<cli::DeviceLayerInputs>(*b.comm, b.shape);
  b.ro.kind = ref::parse_routing_kind(c.routing), b.ro.seed = c.seed;
  SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&b.sms, cudaDevAttrMultiProcessorCount, b.comm->placement(0).device));
}

// Check before timing: the fused-vs-composed bitwise check (moe/layer_check.hpp: each layer into poisoned y) on the
// same inputs. Returns the fused layer's arguments (inputs staged in its workspace).
std::vector<MoeForwardArgs> check_fused(MoeBench& b, ComposedMoe& composed, const std::vector<MoeForwardArgs>& fargs,
                                        Row& row) {
  auto margs = cli::stage_in_mega_workspace(*b.comm, b.shape, *b.fused, fargs);
  const moe::LayerComparison c = moe::compare_layers_bitwise(*b.comm, composed, fargs, *b.fused, margs, b.shape.hidden);
  row.fused_equal = c.diff.equal();
  std::printf("tokens %d: fused == composed (bitwise): %s%s\n", row.tokens, row.fused_equal ? "yes, " : "NO, ",
              c.diff.to_string().c_str());
  return margs;
}

// The fields every row of one token count shares (docs/design.md §10.3, bench moe), for a layer timed at t us.
JsonLine layer_line(const MoeBench& b, const Row& row, const char* op, double t) {
  const cli::RankTraffic& tr = row.traffic;
  const MoeShape& shape = b.shape;
  JsonLine line = common_fields("moe", b.argc, b.argv);
  line.add("op", op)
      .add("weights", format_name(row.weights))
      .add("shape", b.config.model.name)
      .add("hidden", shape.hidden)
      .add("intermediate", shape.intermediate)
      .add("experts", shape.num_experts)
      .add("topk", shape.num_topk)
      .add("ranks", b.R)
      .add("tokens", row.tokens)
      .add("sms", b.sms)
      .add("time_us", t)
      .add("tflops", tr.flops(shape) / t / 1e6)
      .add("hbm_gbps", tr.hbm_bytes(shape, row.weights) / t / 1e3)
      .add("hbm_ceiling_gbps", b.hbm_ceiling)
      .add("weight_gbps", tr.weight_bytes(shape, row.weights) / t / 1e3)
      .add("weight_fraction_of_ceiling", tr.weight_bytes(shape, row.weights) / t / 1e3 / b.hbm_ceiling)
      .add("nvl_gbps", tr.nvl_bytes(shape) / t / 1e3)
      .add("recv_pairs", double(tr.recv_pairs))
      .add("experts_touched", tr.experts_touched);
  return line;
}

// Times the fused layer at row.tokens, then (with --trace) one traced call; appends its result line.
void time_fused(MoeBench& b, const std::vector<MoeForwardArgs>& margs, int calls, Row& row) {
  const MoeBenchConfig& c = b.config;
  const int T = row.tokens;
  row.fused_us = graph_time_all_ranks_us(
      *b.comm, [&] { b.fused->forward(margs); }, calls, c.reps);
  b.fused->synchronize();
  const double t = row.fused_us;
  JsonLine line = layer_line(b, row, "fused", t);
  line.add("bitwise_equal_composed", row.fused_equal)
      .add("routing", c.routing)
      .add("plan", b.fused->plan_for_tokens(0, T).to_string());
  if (c.time_composed) line.add("speedup_vs_composed", row.forward_us / t);
  if (c.trace)
    print_trace(*b.comm, *b.fused, margs, T, b.shape,
                c.trace_raw.empty() ? std::string()
                                    : c.trace_raw + "/trace-" + c.model.name + "-" + std::to_string(T) + ".csv");
  line.add("note", "fused single-kernel layer (MegaMoe), inputs in its workspace; metrics for rank 0");
  append_result(c.out, "moe", line);
}

// The composed layer's result line (its stage times were measured in measure_point).
void write_composed(const MoeBench& b, const Row& row) {
  const cli::RankTraffic& tr = row.traffic;
  JsonLine line = layer_line(b, row, "composed", row.forward_us);
  line.add("dispatch_us", row.dispatch_us)
      .add("l1_us", row.l1_us)
      .add("l2_us", row.l2_us)
      .add("combine_us", row.combine_us)
      .add("l1_tflops", tr.flops(b.shape) * 2 / 3 / row.l1_us / 1e6)
      .add("l2_tflops", tr.flops(b.shape) / 3 / row.l2_us / 1e6)
      .add("routing", b.config.routing)
      .add("alignment", b.opt.expert_alignment)
      .add("note", "composed pipeline (EP dispatch expand + grouped GEMMs + EP combine); metrics for rank 0");
  append_result(b.config.out, "moe", line);
}

// One weight format at one token count: the composed layer's warm-up, the fused check, the composed stages
// and the fused layer timed, result lines written.
Row measure_variant(MoeBench& b, LayerVariant& v, const std::vector<MoeForwardArgs>& fargs,
                    const std::vector<ref::Routing>& routings, int T) {
  const MoeBenchConfig& c = b.config;
  ComposedMoe& layer = *v.layer;
  layer.forward(fargs);  // warm-up, then raise any device-detected error before timing
  layer.synchronize();
  const int calls = T >= 2048 ? 2 : 10;
  Row row;
  row.weights = v.format, row.tokens = T;
  row.traffic = cli::rank_traffic(b.shape, routings, 0);
  const bool fused = b.fused != nullptr;
  std::vector<MoeForwardArgs> margs;
  if (fused) {
    b.fused->bind_weights(v.store.views());  // host only; re-plans when the format changes
    std::printf("fused plan (rank %d, %s weights): %s\n", b.comm->local_ranks()[0].rank, format_name(v.format),
                b.fused->plan(0).to_string().c_str());
    margs = check_fused(b, layer, fargs, row);
  }
  if (c.time_composed) {
    row.forward_us = graph_time_all_ranks_us(
        *b.comm, [&] { layer.forward(fargs); }, calls, c.reps);
    row.dispatch_us = graph_time_all_ranks_us(
        *b.comm, [&] { layer.stage_dispatch(fargs); }, calls, c.reps);
    row.l1_us = graph_time_all_ranks_us(
        *b.comm, [&] { layer.stage_experts_l1(fargs); }, calls, c.reps);
    row.l2_us = graph_time_all_ranks_us(
        *b.comm, [&] { layer.stage_experts_l2(fargs); }, calls, c.reps);
    row.combine_us = graph_time_all_ranks_us(
        *b.comm, [&] { layer.stage_combine(fargs); }, calls, c.reps);
    layer.synchronize();
  }
  if (fused) time_fused(b, margs, calls, row);
  if (c.time_composed) write_composed(b, row);
  return row;
}

// One token count: the inputs, then every weight format on them (config.formats order).
std::vector<Row> measure_point(MoeBench& b, int T) {
  std::vector<ref::MoeLayerInput> host;
  std::vector<ref::Routing> routings;
  for (int r = 0; r < b.R; ++r) {
    host.push_back(cli::fast_layer_input(b.shape, T, b.ro, r));
    routings.push_back(host.back().routing);
  }
  // y = null: the result stays in the layer's buffer (no extra copy timed, as the fused layer will write it).
  auto fargs = b.inputs->upload(host);
  for (auto& a : fargs) a.y = nullptr;
  std::vector<Row> rows;
  for (LayerVariant& v : b.variants) rows.push_back(measure_variant(b, v, fargs, routings, T));
  return rows;
}

// Composed columns from time_us on; fused: its time, speedup over composed, bitwise check ("-": not run).
void print_table(const MoeBench& b, const std::vector<Row>& rows) {
  const MoeShape& shape = b.shape;
  std::printf("\n%s, %d ranks (rank 0's view; TFLOPS/HBM of the composed layer, stage times each measured alone)\n",
              b.config.model.name.c_str(), b.R);
  std::printf("%7s %7s %8s %10s %8s %8s %9s %9s %9s %9s %9s %10s %8s %7s\n", "weights", "tokens", "pairs", "time_us",
              "TFLOPS", "HBM_GB/s", "disp_us", "l1_us", "l2_us", "comb_us", "sum_us", "fused_us", "speedup", "bitwise");
  for (const auto& r : rows) {
    const double t = r.forward_us;
    std::printf("%7s %7d %8lld", format_name(r.weights), r.tokens, r.traffic.recv_pairs);
    if (t > 0)
      std::printf(" %10.1f %8.1f %8.0f %9.1f %9.1f %9.1f %9.1f %9.1f", t, r.traffic.flops(shape) / t / 1e6,
                  r.traffic.hbm_bytes(shape, r.weights) / t / 1e3, r.dispatch_us, r.l1_us, r.l2_us, r.combine_us,
                  r.dispatch_us + r.l1_us + r.l2_us + r.combine_us);
    else
      std::printf(" %10s %8s %8s %9s %9s %9s %9s %9s", "-", "-", "-", "-", "-", "-", "-", "-");
    if (r.fused_us > 0 && t > 0)
      std::printf(" %10.1f %7.2fx %7s\n", r.fused_us, t / r.fused_us, r.fused_equal ? "yes" : "NO");
    else if (r.fused_us > 0)
      std::printf(" %10.1f %8s %7s\n", r.fused_us, "-", r.fused_equal ? "yes" : "NO");
    else
      std::printf(" %10s %8s %7s\n", "-", "-", "-");
  }
}

int run_moe_bench(int argc, char** argv) {
  cli::Args args("bench moe",
                 "the MoE layer: composed (dispatch -> L1 -> L2 -> combine, with its stage breakdown) "
                 "and fused (one kernel), checked bitwise against each other");
  declare_flags(args);
  if (!args.parse(argc, argv)) return 0;
  if (!require_hopper_gpu()) return 1;
  MoeBench b;
  b.config = read_config(args);
  b.argc = argc, b.argv = argv;
  set_up(b);
  std::vector<Row> rows;
  for (const int T : b.config.token_list)
    for (Row& r : measure_point(b, T)) rows.push_back(r);
  print_table(b, rows);
  return 0;
}

}  // namespace
}  // namespace symmoe::bench

SYMMOE_BENCH(moe, "moe", "MoE layer, composed and fused: time, TFLOPS, HBM GB/s, stage breakdown, fused speedup",
             symmoe::bench::run_moe_bench);
