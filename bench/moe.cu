// `symmoe bench moe`: the composed MoE layer (EP dispatch expand -> grouped GEMM L1 + SwiGLU/FP8 -> grouped GEMM L2
// -> EP combine, include/symmoe/moe.hpp) on every visible GPU as ranks (in-process; --ranks for virtual ranks),
// with its stage breakdown measured in the same run. The fused layer's rows ("op": "fused") come later.
// Inputs: synthetic weights generated on the GPUs, FP8 x (per-128 fp32 scales), routing from ref::make_routing.
// Metrics (DESIGN.md 8), for rank 0 (the rank whose stream is timed; the layer is collective):
//   tflops      2 * recv_pairs * H * I * 3 / t, recv_pairs = (token, expert) pairs rank 0 computes
//   hbm_gbps    (touched local experts' weights incl. scales + recv_pairs * (H + 4H/128) FP8 rows in
//               + recv_pairs * 2H bf16 rows out) / t — the layer's minimum traffic, not every intermediate
//   nvl_gbps    bytes rank 0 exchanges with OTHER ranks (dispatch: token records it receives, x + scales + K
//               idx/weights; combine: bf16 rows it sends back) / t
//   stage times dispatch / l1 (glue + L1) / l2 / combine, each timed alone on the data the previous stage left
// Times: medians of CUDA-graph replays (bench/rank_timer.hpp), host launch overhead excluded.
#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

#include "bench.hpp"
#include "moe_inputs.hpp"
#include "rank_timer.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/moe.hpp"
#include "symmoe/moe_weights.hpp"
#include "symmoe/reference/routing.hpp"

namespace symmoe::bench {
namespace {

struct Row {
  int tokens;
  RankTraffic traffic;
  double forward_us, dispatch_us, l1_us, l2_us, combine_us;
};

int run_moe_bench(int argc, char** argv) {
  cli::Args args("bench moe", "the composed MoE layer (dispatch -> L1 -> L2 -> combine) with its stage breakdown");
  args.option("out", "bench/results", "directory of the JSON-lines result file")
      .option("shape", "flash", "flash | pro | v3 | tiny")
      .option("tokens", "1,8,32,128,512,2048,8192", "tokens per rank")
      .option("ranks", "0", "EP ranks (0: one per visible GPU; more: virtual ranks, round-robin over the GPUs)")
      .option("routing", "uniform", "uniform | zipf | hot")
      .option("alignment", "128", "expert alignment of the expand layout")
      .option("ep-sms", "0", "CTAs of dispatch/combine per rank (0: the EP plan)")
      .option("reps", "20", "timed repetitions per point")
      .option("seed", "1", "seed of weights, inputs and routing");
  if (!args.parse(argc, argv)) return 0;
  const std::string out = args.str("out"), shape_name = args.str("shape");
  const auto token_list = args.int_list("tokens");
  SYMMOE_CHECK(!token_list.empty(), "bench", "--tokens is empty");
  const int reps = args.integer("reps");
  const uint64_t seed = uint64_t(args.integer("seed"));
  int num_gpus = 0;
  SYMMOE_CUDA_CHECK(cudaGetDeviceCount(&num_gpus));
  SYMMOE_CHECK(num_gpus >= 1, "bench", "bench moe needs a GPU");
  const int R = args.integer("ranks") > 0 ? args.integer("ranks") : num_gpus;
  const int T_max = *std::max_element(token_list.begin(), token_list.end());
  const MoeShape shape = named_shape(shape_name, R, T_max);
  shape.validate();
  auto comm = Communicator::in_process(R);
  std::printf("bench moe: %s (%s), %d ranks on %d GPUs, synthetic weights (%.2f GB per rank)\n", shape_name.c_str(),
              shape.to_string().c_str(), R, num_gpus,
              double(MoeWeightStore::expert_bytes(shape)) * shape.num_local_experts() / 1e9);
  const MoeWeightStore weights = MoeWeightStore::synthetic(*comm, shape, seed);
  ComposedMoeOptions opt;
  opt.expert_alignment = args.integer("alignment"), opt.ep_sms = args.integer("ep-sms");
  ComposedMoe layer(*comm, shape, weights.views(), opt);
  DeviceLayerInputs inputs(*comm, shape);
  ref::RoutingOptions ro;
  ro.kind = ref::parse_routing_kind(args.str("routing")), ro.seed = seed;
  int sms = 0;
  SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, comm->placement(0).device));

  std::vector<Row> rows;
  for (const int T : token_list) {
    std::vector<ref::MoeLayerInput> host;
    std::vector<ref::Routing> routings;
    for (int r = 0; r < R; ++r) {
      host.push_back(fast_layer_input(shape, T, ro, r));
      routings.push_back(host.back().routing);
    }
    // y = null: the result stays in the layer's buffer (no extra copy timed, as the fused layer will write it).
    auto fargs = inputs.upload(host);
    for (auto& a : fargs) a.y = nullptr;
    layer.forward(fargs);  // warm-up, then raise any device-detected error before timing
    layer.synchronize();
    const int calls = T >= 2048 ? 2 : 10;
    Row row;
    row.tokens = T;
    row.traffic = rank_traffic(shape, routings, 0);
    row.forward_us = graph_time_all_ranks_us(*comm, [&] { layer.forward(fargs); }, calls, reps);
    row.dispatch_us = graph_time_all_ranks_us(*comm, [&] { layer.stage_dispatch(fargs); }, calls, reps);
    row.l1_us = graph_time_all_ranks_us(*comm, [&] { layer.stage_experts_l1(fargs); }, calls, reps);
    row.l2_us = graph_time_all_ranks_us(*comm, [&] { layer.stage_experts_l2(fargs); }, calls, reps);
    row.combine_us = graph_time_all_ranks_us(*comm, [&] { layer.stage_combine(fargs); }, calls, reps);
    layer.synchronize();
    const double t = row.forward_us;
    const RankTraffic& tr = row.traffic;
    JsonLine line = common_fields("moe", argc, argv);
    line.add("op", "composed")
        .add("shape", shape_name)
        .add("ranks", R)
        .add("tokens", T)
        .add("sms", sms)
        .add("time_us", t)
        .add("tflops", tr.flops(shape) / t / 1e6)
        .add("hbm_gbps", tr.hbm_bytes(shape) / t / 1e3)
        .add("nvl_gbps", tr.nvl_bytes(shape) / t / 1e3)
        .add("recv_pairs", double(tr.recv_pairs))
        .add("experts_touched", tr.experts_touched)
        .add("dispatch_us", row.dispatch_us)
        .add("l1_us", row.l1_us)
        .add("l2_us", row.l2_us)
        .add("combine_us", row.combine_us)
        .add("l1_tflops", tr.flops(shape) * 2 / 3 / row.l1_us / 1e6)
        .add("l2_tflops", tr.flops(shape) / 3 / row.l2_us / 1e6)
        .add("routing", args.str("routing"))
        .add("alignment", opt.expert_alignment)
        .add("note", "composed pipeline (EP dispatch expand + grouped GEMMs + EP combine); metrics for rank 0");
    append_result(out, "moe", line);
    rows.push_back(row);
  }
  std::printf("\ncomposed pipeline, %s, %d ranks (rank 0's view; stage times each measured alone)\n",
              shape_name.c_str(), R);
  std::printf("%7s %8s %10s %8s %8s %9s %9s %9s %9s %9s\n", "tokens", "pairs", "time_us", "TFLOPS", "HBM_GB/s",
              "disp_us", "l1_us", "l2_us", "comb_us", "sum_us");
  for (const auto& r : rows)
    std::printf("%7d %8lld %10.1f %8.1f %8.0f %9.1f %9.1f %9.1f %9.1f %9.1f\n", r.tokens, r.traffic.recv_pairs,
                r.forward_us, r.traffic.flops(shape) / r.forward_us / 1e6, r.traffic.hbm_bytes(shape) / r.forward_us / 1e3,
                r.dispatch_us, r.l1_us, r.l2_us, r.combine_us, r.dispatch_us + r.l1_us + r.l2_us + r.combine_us);
  return 0;
}

}  // namespace
}  // namespace symmoe::bench

SYMMOE_BENCH(moe, "moe", "composed MoE layer: time, TFLOPS, HBM GB/s and the dispatch/L1/L2/combine breakdown",
             symmoe::bench::run_moe_bench);
