// `symmoe bench stream`: how fast the fused kernel's producer pattern can stream FP8 expert weights through shared
// memory when nothing else runs, per TMA access pattern, stage count, box size and CTAs per SM (every configuration
// of bench/stream_kernel.hpp, one run), next to the same run's streaming-read ceiling (bench/hbm_ceiling.hpp).
// Default problem: Flash L1 weights of all 256 experts, [4096 rows][4096 K] bytes each = 4 GiB, far beyond L2.
// The with_a configurations (the fused kernel's stage: weights + activation box) are timed again with each non-zero
// --hold: every consumer warp keeps each stage that many SM clocks before releasing it (the math warps' time on it).
// Tiles: whole waves by default (the largest multiple of the grid: every CTA streams the same bytes, so a tail of a
// few busy SMs does not dilute the rate; at 256 rows and 132 SMs, 4092 of the 4096 tiles); --tail streams them all.
// Metrics (JSON "bench": "stream", "op": the layout): gbps = weight bytes read / t (activation bytes not counted: they
// are L2 hits after the first n-block of an expert), gbps_per_sm = gbps / SMs, fraction_of_ceiling = gbps /
// hbm_ceiling_gbps (measured before the configurations; hbm_ceiling_end_gbps after them, a drift check).
// Times: median of --reps CUDA-event-timed launches after 2 warm-ups, each configuration in turn.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench.hpp"
#include "hbm_ceiling.hpp"
#include "stream_kernel.hpp"
#include "symmoe/cuda_check.hpp"

namespace symmoe::bench {
namespace {

struct StreamRow {
  StreamKernel kernel;
  uint32_t hold_cycles = 0;
  double time_us = 0;
};

// Bytes of weights (and activations) one launch of `k` reads.
double weight_gb(const StreamKernel& k) { return double(k.weight_bytes_read()) / 1e9; }
double act_bytes_read(const StreamKernel& k) {
  return k.config.with_a ? double(k.weight_bytes_read()) * 64 / k.config.box_rows : 0.0;
}
int stage_bytes(const StreamConfig& c) { return c.box_rows * 128 + (c.with_a ? 64 * 128 : 0); }

std::string table_row(const StreamRow& r, int sms, double ceiling) {
  const StreamConfig& c = r.kernel.config;
  const double gbps = weight_gb(r.kernel) / (r.time_us * 1e-6);
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-10s %4d %6d %3s %4d/%-4d %6u %8.1f %9.1f | %8.1f %9.0f %7.1f %7.3f",
                stream_layout_name(c.layout), c.box_rows, c.stages, c.with_a ? "+A" : "", c.ctas_per_sm,
                r.kernel.resident_ctas_per_sm, r.hold_cycles, stage_bytes(c) / 1024.0,
                double(stage_bytes(c)) * c.stages * std::min(c.ctas_per_sm, r.kernel.resident_ctas_per_sm) / 1024.0,
                r.time_us, gbps, gbps / sms, gbps / ceiling);
  return buf;
}

const char* kTableHeader =
    "layout      box stages   A    CTA/SM   hold  stageKB    ringKB |       us      GB/s GB/s/SM ceiling";

JsonLine result_line(const cli::Args& args, int argc, char** argv, const StreamRow& r, int sms, double ceiling,
                     double ceiling_end) {
  const StreamConfig& c = r.kernel.config;
  const StreamProblem& p = r.kernel.problem;
  const double gbps = weight_gb(r.kernel) / (r.time_us * 1e-6);
  JsonLine line = common_fields("stream", argc, argv);
  line.add("op", stream_layout_name(c.layout))
      .add("shape", std::to_string(p.experts) + "x" + std::to_string(p.rows_per_expert) + "x" + std::to_string(p.k))
      .add("ranks", 1)
      .add("sms", sms)
      .add("experts", p.experts)
      .add("n", p.rows_per_expert)
      .add("k", p.k)
      .add("box_rows", c.box_rows)
      .add("stages", c.stages)
      .add("stage_bytes", stage_bytes(c))
      .add("with_a", c.with_a)
      .add("ctas_per_sm", c.ctas_per_sm)
      .add("resident_ctas_per_sm", r.kernel.resident_ctas_per_sm)
      .add("grid", r.kernel.grid)
      .add("tiles", r.kernel.num_tiles)
      .add("whole_waves", !args.has("tail"))
      .add("smem_bytes", r.kernel.smem_bytes)
      .add("hold_cycles", int(r.hold_cycles))
      .add("time_us", r.time_us)
      .add("weight_bytes", r.kernel.weight_bytes_read())
      .add("act_bytes", act_bytes_read(r.kernel))
      .add("gbps", gbps)
      .add("gbps_per_sm", gbps / sms)
      .add("hbm_ceiling_gbps", ceiling)
      .add("hbm_ceiling_end_gbps", ceiling_end)
      .add("fraction_of_ceiling", gbps / ceiling)
      .add("variant", args.str("variant"));
  return line;
}

int run_stream_bench(int argc, char** argv) {
  cli::Args args("bench stream", "TMA weight streaming alone (the fused kernel's producer pattern) vs HBM ceiling");
  args.option("experts", "256", "experts")
      .int_range(1, 4096)
      .option("n", "4096", "weight rows per expert (a multiple of 256)")
      .int_range(256, 1 << 20)
      .option("k", "4096", "bytes per weight row (a multiple of 128)")
      .int_range(128, 1 << 20)
      .option("reps", "20", "timed launches per configuration (median)")
      .int_range(1, 100000)
      .option("hold", "0,1000,2000",
              "SM clocks each consumer warp holds a stage; non-zero values time the +A configurations again")
      .list_range(0, 1000000)
      .flag("tail",
            "stream every tile (the fused kernel's schedule: a last partial wave on a few SMs) instead of whole waves")
      .option("out", "bench/results", "directory of the JSON-lines result file")
      .option("variant", "default", "name of this run in the JSON lines (field 'variant')");
  if (!args.parse(argc, argv)) return 0;
  const StreamProblem shape{nullptr, nullptr, args.integer("experts"), args.integer("n"), args.integer("k")};
  check_stream_problem(shape);
  const std::vector<int> holds = args.int_list("hold");
  const int reps = args.integer("reps");
  if (!require_hopper_gpu()) return 1;

  int device = 0, sms = 0;
  SYMMOE_CUDA_CHECK(cudaGetDevice(&device));
  SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const double ceiling = hbm_read_ceiling_gbps(shape.weight_bytes());
  std::printf(
      "bench stream: %d experts x [%d rows][%d K] = %.2f GB of weights, %d SMs; HBM streaming-read ceiling "
      "(same run): %.0f GB/s\n",
      shape.experts, shape.rows_per_expert, shape.k, shape.weight_bytes() / 1e9, sms, ceiling);
  uint8_t *weights = nullptr, *act = nullptr;
  uint32_t* sink = nullptr;
  SYMMOE_CUDA_CHECK(cudaMalloc(&weights, shape.weight_bytes()));
  SYMMOE_CUDA_CHECK(cudaMalloc(&act, shape.act_bytes()));
  SYMMOE_CUDA_CHECK(cudaMalloc(&sink, 4));
  SYMMOE_CUDA_CHECK(cudaMemset(weights, 0x5a, shape.weight_bytes()));
  SYMMOE_CUDA_CHECK(cudaMemset(act, 0x3c, shape.act_bytes()));
  StreamProblem problem = shape;
  problem.weights = weights, problem.act = act;

  std::vector<StreamRow> rows;
  for (int i = 0; i < kNumStreamConfigs; ++i) {
    const StreamKernel k = prepare_stream_kernel(i, problem, !args.has("tail"));
    rows.push_back({k, 0});
    if (k.config.with_a)
      for (int h : holds)
        if (h > 0) rows.push_back({k, uint32_t(h)});
  }
  cudaStream_t stream;
  SYMMOE_CUDA_CHECK(cudaStreamCreate(&stream));
  std::printf("%s\n", kTableHeader);
  for (StreamRow& r : rows) {
    r.time_us = median_time_us(
        stream, [&] { r.kernel.launch(r.hold_cycles, sink, stream); }, 2, reps);
    std::printf("%s\n", table_row(r, sms, ceiling).c_str());
  }
  SYMMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  SYMMOE_CUDA_CHECK(cudaStreamDestroy(stream));
  SYMMOE_CUDA_CHECK(cudaFree(weights));
  SYMMOE_CUDA_CHECK(cudaFree(act));
  SYMMOE_CUDA_CHECK(cudaFree(sink));
  const double ceiling_end = hbm_read_ceiling_gbps(shape.weight_bytes());
  for (const StreamRow& r : rows)
    append_result(args.str("out"), "stream", result_line(args, argc, argv, r, sms, ceiling, ceiling_end));
  std::printf(
      "\n== stream summary: weight GB/s vs the HBM streaming-read ceiling %.0f GB/s (start) / %.0f GB/s (end);"
      " CTA/SM = asked/resident, ringKB = stage bytes per SM ==\n%s\n",
      ceiling, ceiling_end, kTableHeader);
  for (const StreamRow& r : rows) std::printf("%s\n", table_row(r, sms, ceiling).c_str());
  return 0;
}

}  // namespace
}  // namespace symmoe::bench

SYMMOE_BENCH(stream, "stream", "TMA weight streaming alone per layout / stages / box vs the HBM read ceiling",
             symmoe::bench::run_stream_bench);
