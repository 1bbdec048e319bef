// `symmoe bench ep`: EP dispatch and combine on 2+ GPUs (in-process, one rank per GPU), in ONE run:
//   dispatch  fresh (counting included), FP8 E4M3 x + fp32 scales per 128, non-expand, cpu_sync off
//   combine   BF16 rows back to the sources, non-expand, no weights/biases
// for shapes v3 / flash, tokens per rank {128, 512, 4096, 8192} (uniform routing), SMs {8, 16, 24, 32}.
// Metrics (DESIGN.md 8):
//   gbps          DeepEP logical bandwidth: bytes of the rows this rank receives (dispatch: x + scales + int64
//                 top-k idx + fp32 weights; combine: bf16 x) / time, LOCAL rows INCLUDED (gbps_remote: without)
//   nvl_gbps      bytes actually pushed over NVLink per direction (dispatch: whole token records to the peer;
//                 combine: bf16 rows to the peer) / time
//   ceiling_gbps  same run: a plain peer-copy kernel, all SMs, both directions at once, per direction
//   ceiling_at_sms_gbps  the same peer copy on only the point's SM count (what SM stores can reach with those SMs)
//   baseline      NCCL send/recv all-to-all (ncclGroupStart + ncclSend/ncclRecv to every rank incl. self) of the
//                 same logical bytes per rank pair, on the same streams
// --skip: phase-skip masks (ep::SkipPhase bits, src/ep/bench_access.hpp) timed at every point, to see where the time goes (outputs wrong).
// Times: medians of CUDA-event-timed graph launches on rank 0's stream, divided by the calls captured per graph
// (every call is collective: rank 0's kernel ends after the last cross-rank barrier, so its time is the
// collective's). NCCL is timed the same way (its group captured into the graphs: baseline_timing "cuda_graph");
// should capture fail, the eager time (host launch included) is reported instead ("eager"). baseline_eager_us
// is always reported.
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <cstdio>
#include <random>
#include <vector>

#include "bench.hpp"
#include "cli_common/limits.hpp"
#include "ep/bench_access.hpp"
#include "kernels/comm/sym_buffer.cuh"
#include "symmoe/cuda_check.hpp"
#include "symmoe/ep.hpp"
#include "symmoe/layout/ep.hpp"
#include "symmoe/reference/routing.hpp"
#include "symmoe/shape.hpp"

namespace symmoe::bench {
namespace {

#define SYMMOE_NCCL_CHECK(call)                                                                        \
  do {                                                                                                 \
    const ncclResult_t r_ = (call);                                                                    \
    SYMMOE_CHECK(r_ == ncclSuccess, "bench", #call, " failed: ", ncclGetErrorString(r_));              \
  } while (0)

__global__ void __launch_bounds__(512) peer_copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                        size_t num_vec) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < num_vec; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a, dst[i + stride] = b, dst[i + 2 * stride] = c, dst[i + 3 * stride] = d;
  }
  for (; i < num_vec; i += stride) dst[i] = src[i];
}

struct RankData {
  void* x = nullptr;
  void* sf = nullptr;
  int64_t* idx = nullptr;
  float* w = nullptr;
  uint16_t* combine_x = nullptr;
  void* nccl_send = nullptr;
  void* nccl_recv = nullptr;
};

struct Row {
  std::string shape, op;
  int tokens, sms, skip;
  double time_us, gbps, nvl_gbps, ceiling, ceiling_sms, nccl_us;
};

int run_ep_bench(int argc, char** argv) {
  cli::Args args("bench ep", "EP dispatch/combine vs the peer-copy ceiling and NCCL all-to-all");
  args.option("out", "bench/results", "directory of the JSON-lines result file")
      .option("shapes", "v3,flash", "shapes (v3, flash, pro, tiny)")
      .option("tokens", "128,512,4096,8192", "tokens per rank").list_range(1, cli::kMaxTokensPerRank)
      .option("sms", "8,16,24,32", "SMs (CTAs) per rank for dispatch and combine").list_range(1, 1024)
      .option("reps", "30", "timed repetitions per point").int_range(1, 100000)
      .option("variant", "ep4", "variant tag written to every result line (kernel generation)")
      .option("skip", "0",
              "phase-skip masks to time at every point (ep::SkipPhase bits, kernels/ep/params.hpp; 0 = full "
              "kernels; any other value gives wrong outputs and is tagged variant-skipN)");
  if (!args.parse(argc, argv)) return 0;
  if (!require_hopper_gpu()) return 1;
  const std::string out = args.str("out");
  const auto token_list = args.int_list("tokens");
  const auto sm_list = args.int_list("sms");
  const auto skip_list = args.int_list("skip");
  const int reps = args.integer("reps");
  int num_gpus = 0;
  SYMMOE_CUDA_CHECK(cudaGetDeviceCount(&num_gpus));
  SYMMOE_CHECK(num_gpus >= 2, "bench", "bench ep needs at least 2 GPUs, found ", num_gpus);
  auto comm = Communicator::in_process(num_gpus);
  const int R = comm->num_ranks();
  const int T_max = *std::max_element(token_list.begin(), token_list.end());
  const auto on = [&](int rank) { SYMMOE_CUDA_CHECK(cudaSetDevice(comm->placement(rank).device)); };
  cudaStream_t s0 = comm->stream(0);

  // ---- NCCL (host API, one communicator per GPU in this process) ----
  std::vector<ncclComm_t> nccl(R);
  std::vector<int> devs(R);
  for (int r = 0; r < R; ++r) devs[r] = comm->placement(r).device;
  SYMMOE_NCCL_CHECK(ncclCommInitAll(nccl.data(), R, devs.data()));

  // ---- same-run ceiling: every rank pushes to the next one at once, all SMs (and each SM count of the sweep) ----
  double ceiling = 0;
  std::map<int, double> ceiling_at;
  {
    const size_t bytes = size_t(256) << 20;
    SymmetricBuffer dst = comm->alloc_symmetric(bytes);
    std::vector<void*> src(R);
    for (int r = 0; r < R; ++r) {
      on(r);
      SYMMOE_CUDA_CHECK(cudaMalloc(&src[r], bytes));
    }
    on(0);
    const auto peer_copy_gbps = [&](int ctas) {  // ctas <= 0: all SMs
      const double us = median_time_us(s0, [&] {
        for (int r = 0; r < R; ++r) {
          on(r);
          const comm::SymBuffer sym = comm::make_sym_buffer(dst, r);
          int sms = 0;
          SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, devs[r]));
          peer_copy_kernel<<<ctas > 0 ? std::min(ctas, sms) : sms, 512, 0, comm->stream(r)>>>(
              static_cast<const uint4*>(src[r]), sym.map(static_cast<uint4*>(dst.ptr(r)), (r + 1) % R), bytes / 16);
          SYMMOE_CUDA_CHECK_LAUNCH("peer_copy_kernel");
        }
        on(0);
      }, 3, 20);
      comm->synchronize();
      return double(bytes) / us / 1e3;
    };
    ceiling = peer_copy_gbps(0);
    for (const int sms : sm_list) {
      ceiling_at[sms] = peer_copy_gbps(sms);
      std::printf("peer-copy at %d SMs per rank (all ranks pushing at once): %.1f GB/s per direction\n", sms,
                  ceiling_at[sms]);
    }
    for (int r = 0; r < R; ++r) {
      on(r);
      SYMMOE_CUDA_CHECK(cudaFree(src[r]));
    }
    std::printf("peer-copy ceiling (all SMs, all ranks pushing at once): %.1f GB/s per direction\n", ceiling);
  }

  std::vector<Row> rows;
  for (const std::string& shape_name : args.str_list("shapes")) {
    const MoeShape shape = named_shape(shape_name, R, T_max);
    EpBufferConfig cfg;
    cfg.num_max_tokens_per_rank = T_max, cfg.hidden = shape.hidden, cfg.num_topk = shape.num_topk;
    cfg.num_experts = shape.num_experts, cfg.dtype = EpDtype::kFp8E4m3, cfg.scales = EpScales::kFp32Per128;
    EpBuffer buffer(*comm, cfg);
    const int H = cfg.hidden, K = cfg.num_topk, xb = buffer.x_row_bytes(), sb = buffer.scale_row_bytes();
    const size_t logical_row = size_t(xb) + sb + size_t(K) * (8 + 4);
    const size_t record = layout::TokenRecord(H, K, layout::TokenDtype::kFp8E4m3, sb).stride;  // pushed bytes
    std::vector<RankData> data(R);
    std::mt19937_64 rng(42);
    for (int r = 0; r < R; ++r) {
      on(r);
      SYMMOE_CUDA_CHECK(cudaMalloc(&data[r].x, size_t(T_max) * xb));
      SYMMOE_CUDA_CHECK(cudaMalloc(&data[r].sf, size_t(T_max) * sb));
      SYMMOE_CUDA_CHECK(cudaMalloc(&data[r].idx, size_t(T_max) * K * 8));
      SYMMOE_CUDA_CHECK(cudaMalloc(&data[r].w, size_t(T_max) * K * 4));
      SYMMOE_CUDA_CHECK(cudaMalloc(&data[r].combine_x, size_t(R) * T_max * H * 2));
      SYMMOE_CUDA_CHECK(cudaMemset(data[r].x, 0x3c, size_t(T_max) * xb));
      SYMMOE_CUDA_CHECK(cudaMemset(data[r].sf, 0x3f, size_t(T_max) * sb));
      SYMMOE_CUDA_CHECK(cudaMemset(data[r].w, 0, size_t(T_max) * K * 4));
      SYMMOE_CUDA_CHECK(cudaMemset(data[r].combine_x, 0x3f, size_t(R) * T_max * H * 2));
      SYMMOE_CUDA_CHECK(cudaMalloc(&data[r].nccl_send, size_t(R) * T_max * logical_row));
      SYMMOE_CUDA_CHECK(cudaMalloc(&data[r].nccl_recv, size_t(R) * T_max * logical_row));
    }
    for (const int T : token_list) {
      // Routing (uniform, seeded per rank) and a synced fresh dispatch for the counts and the combine handle.
      std::vector<EpDispatchArgs> dargs(R);
      for (int r = 0; r < R; ++r) {
        ref::RoutingOptions ro;
        ro.seed = 1234;
        const ref::Routing rt = ref::make_routing(T, cfg.num_experts, K, ro, r);
        on(r);
        SYMMOE_CUDA_CHECK(cudaMemcpy(data[r].idx, rt.topk_idx.data(), rt.topk_idx.size() * 8, cudaMemcpyHostToDevice));
        dargs[r].num_tokens = T, dargs[r].x = data[r].x, dargs[r].x_scales = data[r].sf;
        dargs[r].topk_idx = data[r].idx, dargs[r].topk_weights = data[r].w;
      }
      std::vector<EpHandle> handles(R);
      EpDispatchOptions opt;
      buffer.dispatch(dargs, opt, handles);
      // Rows each rank sends to each rank (from the handles), for byte counts and the NCCL baseline.
      std::vector<std::vector<int32_t>> sent(R, std::vector<int32_t>(R));
      for (int r = 0; r < R; ++r) {
        on(r);
        SYMMOE_CUDA_CHECK(cudaMemcpy(sent[r].data(), handles[r].num_tokens_per_rank, R * 4, cudaMemcpyDeviceToHost));
      }
      size_t recv_rows0 = 0, remote_rows0 = 0, remote_rows_all = 0;
      for (int src = 0; src < R; ++src) {
        recv_rows0 += sent[src][0];
        if (src != 0) remote_rows0 += sent[src][0];
        for (int dst = 0; dst < R; ++dst)
          if (dst != src) remote_rows_all += sent[src][dst];
      }
      const double remote_rows_per_rank = double(remote_rows_all) / R;
      on(0);
      const auto nccl_exchange = [&] {
        SYMMOE_NCCL_CHECK(ncclGroupStart());
        for (int r = 0; r < R; ++r) {
          size_t off_s = 0, off_r = 0;
          for (int p = 0; p < R; ++p) {
            const size_t bs = size_t(sent[r][p]) * logical_row, br = size_t(sent[p][r]) * logical_row;
            SYMMOE_NCCL_CHECK(ncclSend(static_cast<uint8_t*>(data[r].nccl_send) + off_s, bs, ncclUint8, p, nccl[r],
                                       comm->stream(r)));
            SYMMOE_NCCL_CHECK(ncclRecv(static_cast<uint8_t*>(data[r].nccl_recv) + off_r, br, ncclUint8, p, nccl[r],
                                       comm->stream(r)));
            off_s += bs, off_r += br;
          }
        }
        SYMMOE_NCCL_CHECK(ncclGroupEnd());
        on(0);
      };
      const double nccl_eager_us = median_time_us(s0, nccl_exchange, 3, reps);
      double nccl_us = nccl_eager_us;
      std::string nccl_timing = "eager";
      try {
        nccl_us = graph_time_all_ranks_us(*comm, nccl_exchange, T >= 4096 ? 4 : 20, reps);
        nccl_timing = "cuda_graph";
      } catch (const std::exception& e) {
        std::printf("NCCL graph capture failed (%s); reporting the eager time\n", e.what());
        for (int r = 0; r < R; ++r) {  // leave no stream capturing
          on(r);
          cudaGraph_t g = nullptr;
          if (cudaStreamEndCapture(comm->stream(r), &g) == cudaSuccess && g) cudaGraphDestroy(g);
          cudaGetLastError();
        }
        nccl_us = nccl_eager_us;
        on(0);
      }
      for (const int sms : sm_list) {
        for (const int skip : skip_list) {
          // Read by every call while it launches (the graphs below capture it at capture time).
          EpBenchAccess::set_skip_phases(buffer, uint32_t(skip));
          const std::string variant = args.str("variant") + (skip ? "-skip" + std::to_string(skip) : "");
          opt.cpu_sync = false, opt.num_sms = sms;
          const int calls = T >= 4096 ? 4 : 20;
          const double d_us =
              graph_time_all_ranks_us(*comm, [&] { buffer.dispatch(dargs, opt, handles); }, calls, reps);
          std::vector<EpCombineArgs> cargs(R);
          for (int r = 0; r < R; ++r) cargs[r].x = data[r].combine_x;
          EpCombineOptions co;
          co.cpu_sync = false, co.num_sms = sms;
          const double c_us =
              graph_time_all_ranks_us(*comm, [&] { buffer.combine(cargs, co, handles); }, calls, reps);
          comm->synchronize();
          buffer.synchronize();
          const double d_gbps = double(recv_rows0) * logical_row / d_us / 1e3;
          const double d_remote = double(remote_rows0) * logical_row / d_us / 1e3;
          const double d_nvl = remote_rows_per_rank * record / d_us / 1e3;
          const double c_gbps = double(recv_rows0) * H * 2 / c_us / 1e3;
          const double c_remote = double(remote_rows0) * H * 2 / c_us / 1e3;
          const double c_nvl = remote_rows_per_rank * H * 2 / c_us / 1e3;
          for (int op = 0; op < 2; ++op) {
            JsonLine line = common_fields("ep", argc, argv);
            line.add("op", op == 0 ? "dispatch" : "combine")
                .add("shape", shape_name)
                .add("ranks", R)
                .add("tokens", T)
                .add("sms", sms)
                .add("time_us", op == 0 ? d_us : c_us)
                .add("gbps", op == 0 ? d_gbps : c_gbps)
                .add("gbps_remote", op == 0 ? d_remote : c_remote)
                .add("local_traffic", "included in gbps")
                .add("nvl_gbps", op == 0 ? d_nvl : c_nvl)
                .add("ceiling_gbps", ceiling)
                .add("nvl_fraction_of_ceiling", (op == 0 ? d_nvl : c_nvl) / ceiling)
                .add("ceiling_at_sms_gbps", ceiling_at[sms])
                .add("dtype", op == 0 ? "fp8_e4m3+fp32_per128" : "bf16")
                .add("baseline", "nccl")
                .add("baseline_time_us", nccl_us)
                .add("baseline_timing", nccl_timing)
                .add("baseline_eager_us", nccl_eager_us)
                .add("variant", variant)
                .add("skip", skip)
                .add("baseline_gbps_remote", remote_rows_per_rank * logical_row / nccl_us / 1e3);
            append_result(out, "ep", line);
          }
          const double ceil_sms = ceiling_at[sms];
          rows.push_back({shape_name, "dispatch", T, sms, skip, d_us, d_gbps, d_nvl, ceiling, ceil_sms, nccl_us});
          rows.push_back({shape_name, "combine", T, sms, skip, c_us, c_gbps, c_nvl, ceiling, ceil_sms, nccl_us});
        }
      }
      EpBenchAccess::set_skip_phases(buffer, 0);
    }
    for (int r = 0; r < R; ++r) {
      on(r);
      for (void* p : {data[r].x, data[r].sf, static_cast<void*>(data[r].idx), static_cast<void*>(data[r].w),
                      static_cast<void*>(data[r].combine_x), data[r].nccl_send, data[r].nccl_recv})
        SYMMOE_CUDA_CHECK(cudaFree(p));
    }
  }
  for (auto& c : nccl) ncclCommDestroy(c);

  std::printf("\n%-6s %-9s %6s %4s %4s %10s %9s %9s %7s %8s %10s\n", "shape", "op", "tokens", "sms", "skip",
              "time_us", "GB/s", "nvl_GB/s", "%ceil", "%ceilSM", "nccl_us");
  for (const auto& r : rows)
    std::printf("%-6s %-9s %6d %4d %4d %10.2f %9.1f %9.1f %6.1f%% %7.1f%% %10.2f\n", r.shape.c_str(), r.op.c_str(),
                r.tokens, r.sms, r.skip, r.time_us, r.gbps, r.nvl_gbps, 100.0 * r.nvl_gbps / r.ceiling,
                100.0 * r.nvl_gbps / r.ceiling_sms, r.nccl_us);
  return 0;
}

}  // namespace
}  // namespace symmoe::bench

SYMMOE_BENCH(ep, "ep", "EP dispatch/combine vs tokens and SMs; peer-copy ceiling and NCCL all-to-all in the same run",
             symmoe::bench::run_ep_bench);
