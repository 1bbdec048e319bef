// `symmoe bench ep`: EP dispatch and combine on 2+ GPUs (in-process, one rank per GPU), in ONE run:
//   dispatch  fresh (counting included), FP8 E4M3 x + fp32 scales per 128, non-expand, cpu_sync off
//   combine   BF16 rows back to the sources, non-expand, no weights/biases
// for shapes v3 / flash, tokens per rank {128, 512, 4096, 8192} (uniform routing), SMs {8, 16, 24, 32}.
// Metrics (docs/design.md §10.2):
//   gbps          DeepEP logical bandwidth: bytes of the rows this rank receives (dispatch: x + scales + int64
//                 top-k idx + fp32 weights; combine: bf16 x) / time, LOCAL rows INCLUDED (gbps_remote: without)
//   nvl_gbps      bytes actually pushed over NVLink per direction (dispatch: whole token records to the peer;
//                 combine: bf16 rows to the peer) / time
//   ceiling_gbps  same run: a plain peer-copy kernel, all SMs, both directions at once, per direction
//   ceiling_at_sms_gbps  the same peer copy on only the point's SM count (what SM stores can reach with those SMs)
//   baseline      NCCL send/recv all-to-all (ncclGroupStart + ncclSend/ncclRecv to every rank incl. self) of the
//                 same logical bytes per rank pair, on the same streams
// Times: medians of CUDA-event-timed graph launches on rank 0's stream, divided by the calls captured per graph (every
// call is collective: rank 0's kernel ends after the last cross-rank barrier, so its time is the collective's). NCCL is
// timed the same way (its group captured into the graphs: baseline_timing "cuda_graph"); should capture fail, the eager
// time (host launch included) is reported instead ("eager"). baseline_eager_us is always reported.
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench.hpp"
#include "cli_common/limits.hpp"
#include "kernels/comm/sym_buffer.cuh"
#include "symmoe/cuda_check.hpp"
#include "symmoe/ep.hpp"
#include "symmoe/layout/ep.hpp"
#include "symmoe/reference/routing.hpp"
#include "symmoe/shape.hpp"

namespace symmoe::bench {
namespace {

#define SYMMOE_NCCL_CHECK(call)                                                           \
  do {                                                                                    \
    const ncclResult_t r_ = (call);                                                       \
    SYMMOE_CHECK(r_ == ncclSuccess, "bench", #call, " failed: ", ncclGetErrorString(r_)); \
  } while (0)

__global__ void __launch_bounds__(512)
    peer_copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t num_vec) {
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
  int tokens, sms;
  double time_us, gbps, nvl_gbps, ceiling, ceiling_sms, nccl_us;
};

struct EpBenchConfig {
  std::string out, variant;
  std::vector<std::string> shapes;
  std::vector<int> token_list, sm_list;
  int reps = 0;
};

// The ranks (one per GPU, in-process), their NCCL communicators and the same-run ceilings every point refers to.
struct EpBench {
  EpBenchConfig config;
  int argc = 0;
  char** argv = nullptr;
  std::unique_ptr<Communicator> comm;
  int R = 0, T_max = 0;
  std::vector<ncclComm_t> nccl;
  std::vector<int> devs;
  double ceiling = 0;                // peer copy, all SMs
  std::map<int, double> ceiling_at;  // peer copy at each SM count of the sweep
  void on(int rank) const { SYMMOE_CUDA_CHECK(cudaSetDevice(comm->placement(rank).device)); }
};

// What one token count moves, from the handles of a synced fresh dispatch.
struct PointTraffic {
  std::vector<std::vector<int32_t>> sent;  // [src][dst] rows
  size_t recv_rows0 = 0, remote_rows0 = 0;
  double remote_rows_per_rank = 0;
};

EpBenchConfig parse_flags(cli::Args& args) {
  EpBenchConfig c;
  c.out = args.str("out");
  c.token_list = args.int_list("tokens");
  c.sm_list = args.int_list("sms");
  c.reps = args.integer("reps");
  c.shapes = args.str_list("shapes");
  c.variant = args.str("variant");
  return c;
}

// Same-run ceiling: every rank pushes to the next one at once, all SMs (and each SM count of the sweep).
void measure_ceilings(EpBench& b) {
  const int R = b.R;
  Communicator& comm = *b.comm;
  const size_t bytes = size_t(256) << 20;
  SymmetricBuffer dst = comm.alloc_symmetric(bytes);
  std::vector<void*> src(R);
  for (int r = 0; r < R; ++r) {
    b.on(r);
    SYMMOE_CUDA_CHECK(cudaMalloc(&src[r], bytes));
  }
  b.on(0);
  const auto peer_copy_gbps = [&](int ctas) {  // ctas <= 0: all SMs
    const double us = median_time_us(
        comm.stream(0),
        [&] {
          for (int r = 0; r < R; ++r) {
            b.on(r);
            const comm::SymBuffer sym = comm::make_sym_buffer(dst, r);
            int sms = 0;
            SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, b.devs[r]));
            const int grid = ctas > 0 ? std::min(ctas, sms) : sms;
            peer_copy_kernel<<<grid, 512, 0, comm.stream(r)>>>(
                static_cast<const uint4*>(src[r]), sym.map(static_cast<uint4*>(dst.ptr(r)), (r + 1) % R), bytes / 16);
            SYMMOE_CUDA_CHECK_LAUNCH("peer_copy_kernel");
          }
          b.on(0);
        },
        3, 20);
    comm.synchronize();
    return double(bytes) / us / 1e3;
  };
  b.ceiling = peer_copy_gbps(0);
  for (const int sms : b.config.sm_list) {
    b.ceiling_at[sms] = peer_copy_gbps(sms);
    std::printf("peer-copy at %d SMs per rank (all ranks pushing at once): %.1f GB/s per direction\n", sms,
                b.ceiling_at[sms]);
  }
  for (int r = 0; r < R; ++r) {
    b.on(r);
    SYMMOE_CUDA_CHECK(cudaFree(src[r]));
  }
  std::printf("peer-copy ceiling (all SMs, all ranks pushing at once): %.1f GB/s per direction\n", b.ceiling);
}

// Inputs (constant bytes) and the NCCL baseline's buffers of every rank for up to T_max tokens.
std::vector<RankData> allocate_rank_data(const EpBench& b, const EpBuffer& buffer, const EpBufferConfig& cfg,
                                         size_t logical_row) {
  const int R = b.R, T_max = b.T_max, H = cfg.hidden, K = cfg.num_topk;
  const int xb = buffer.x_row_bytes(), sb = buffer.scale_row_bytes();
  std::vector<RankData> data(R);
  for (int r = 0; r < R; ++r) {
    b.on(r);
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
  return data;
}

void free_rank_data(const EpBench& b, const std::vector<RankData>& data) {
  for (int r = 0; r < b.R; ++r) {
    b.on(r);
    for (void* p : {data[r].x, data[r].sf, static_cast<void*>(data[r].idx), static_cast<void*>(data[r].w),
                    static_cast<void*>(data[r].combine_x), data[r].nccl_send, data[r].nccl_recv})
      SYMMOE_CUDA_CHECK(cudaFree(p));
  }
}

// Routing (uniform, seeded per rank) uploaded, then a synced fresh dispatch for the counts and the combine handle;
// returns the rows each rank sends to each rank (from the handles), for byte counts and the NCCL baseline.
PointTraffic dispatch_once(const EpBench& b, EpBuffer& buffer, const EpBufferConfig& cfg,
                           const std::vector<RankData>& data, int T, std::vector<EpDispatchArgs>& dargs,
                           std::vector<EpHandle>& handles) {
  const int R = b.R, K = cfg.num_topk;
  for (int r = 0; r < R; ++r) {
    ref::RoutingOptions ro;
    ro.seed = 1234;
    const ref::Routing rt = ref::make_routing(T, cfg.num_experts, K, ro, r);
    b.on(r);
    SYMMOE_CUDA_CHECK(cudaMemcpy(data[r].idx, rt.topk_idx.data(), rt.topk_idx.size() * 8, cudaMemcpyHostToDevice));
    dargs[r].num_tokens = T, dargs[r].x = data[r].x, dargs[r].x_scales = data[r].sf;
    dargs[r].topk_idx = data[r].idx, dargs[r].topk_weights = data[r].w;
  }
  EpDispatchOptions opt;
  buffer.dispatch(dargs, opt, handles);
  PointTraffic t;
  t.sent.assign(R, std::vector<int32_t>(R));
  for (int r = 0; r < R; ++r) {
    b.on(r);
    SYMMOE_CUDA_CHECK(cudaMemcpy(t.sent[r].data(), handles[r].num_tokens_per_rank, R * 4, cudaMemcpyDeviceToHost));
  }
  size_t remote_rows_all = 0;
  for (int src = 0; src < R; ++src) {
    t.recv_rows0 += t.sent[src][0];
    if (src != 0) t.remote_rows0 += t.sent[src][0];
    for (int dst = 0; dst < R; ++dst)
      if (dst != src) remote_rows_all += t.sent[src][dst];
  }
  t.remote_rows_per_rank = double(remote_rows_all) / R;
  b.on(0);
  return t;
}

struct NcclTime {
  double us = 0, eager_us = 0;
  std::string timing;  // "cuda_graph", or "eager" where capture failed
};

// The NCCL send/recv all-to-all of the same logical bytes per rank pair: eager, then captured into CUDA graphs
// (the eager time where capture fails).
NcclTime time_nccl(const EpBench& b, const std::vector<RankData>& data, const PointTraffic& tr, size_t logical_row,
                   int T) {
  const int R = b.R;
  Communicator& comm = *b.comm;
  const auto nccl_exchange = [&] {
    SYMMOE_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < R; ++r) {
      size_t off_s = 0, off_r = 0;
      for (int p = 0; p < R; ++p) {
        const size_t bs = size_t(tr.sent[r][p]) * logical_row, br = size_t(tr.sent[p][r]) * logical_row;
        SYMMOE_NCCL_CHECK(
            ncclSend(static_cast<uint8_t*>(data[r].nccl_send) + off_s, bs, ncclUint8, p, b.nccl[r], comm.stream(r)));
        SYMMOE_NCCL_CHECK(
            ncclRecv(static_cast<uint8_t*>(data[r].nccl_recv) + off_r, br, ncclUint8, p, b.nccl[r], comm.stream(r)));
        off_s += bs, off_r += br;
      }
    }
    SYMMOE_NCCL_CHECK(ncclGroupEnd());
    b.on(0);
  };
  NcclTime t;
  t.eager_us = median_time_us(comm.stream(0), nccl_exchange, 3, b.config.reps);
  t.us = t.eager_us;
  t.timing = "eager";
  try {
    t.us = graph_time_all_ranks_us(comm, nccl_exchange, T >= 4096 ? 4 : 20, b.config.reps);
    t.timing = "cuda_graph";
  } catch (const std::exception& e) {
    std::printf("NCCL graph capture failed (%s); reporting the eager time\n", e.what());
    for (int r = 0; r < R; ++r) {  // leave no stream capturing
      b.on(r);
      cudaGraph_t g = nullptr;
      if (cudaStreamEndCapture(comm.stream(r), &g) == cudaSuccess && g) cudaGraphDestroy(g);
      cudaGetLastError();
    }
    t.us = t.eager_us;
    b.on(0);
  }
  return t;
}

// One point of the sweep already dispatched once: what it measures and where.
struct Point {
  std::string shape_name;
  int T = 0, H = 0;
  size_t logical_row = 0, record = 0;
  PointTraffic traffic;
  NcclTime nccl;
};

// Dispatch and combine at `sms` SMs: timed, two result lines, two table rows.
void time_ep_point(EpBench& b, EpBuffer& buffer, const std::vector<RankData>& data, const Point& pt, int sms,
                   std::vector<EpDispatchArgs>& dargs, std::vector<EpHandle>& handles, std::vector<Row>& rows) {
  const int R = b.R, T = pt.T, H = pt.H;
  Communicator& comm = *b.comm;
  EpDispatchOptions opt;
  opt.cpu_sync = false, opt.num_sms = sms;
  const int calls = T >= 4096 ? 4 : 20, reps = b.config.reps;
  const double d_us = graph_time_all_ranks_us(
      comm, [&] { buffer.dispatch(dargs, opt, handles); }, calls, reps);
  std::vector<EpCombineArgs> cargs(R);
  for (int r = 0; r < R; ++r) cargs[r].x = data[r].combine_x;
  EpCombineOptions co;
  co.cpu_sync = false, co.num_sms = sms;
  const double c_us = graph_time_all_ranks_us(
      comm, [&] { buffer.combine(cargs, co, handles); }, calls, reps);
  comm.synchronize();
  buffer.synchronize();
  const PointTraffic& tr = pt.traffic;
  const double d_gbps = double(tr.recv_rows0) * pt.logical_row / d_us / 1e3;
  const double d_remote = double(tr.remote_rows0) * pt.logical_row / d_us / 1e3;
  const double d_nvl = tr.remote_rows_per_rank * pt.record / d_us / 1e3;
  const double c_gbps = double(tr.recv_rows0) * H * 2 / c_us / 1e3;
  const double c_remote = double(tr.remote_rows0) * H * 2 / c_us / 1e3;
  const double c_nvl = tr.remote_rows_per_rank * H * 2 / c_us / 1e3;
  for (int op = 0; op < 2; ++op) {
    JsonLine line = common_fields("ep", b.argc, b.argv);
    line.add("op", op == 0 ? "dispatch" : "combine")
        .add("shape", pt.shape_name)
        .add("ranks", R)
        .add("tokens", T)
        .add("sms", sms)
        .add("time_us", op == 0 ? d_us : c_us)
        .add("gbps", op == 0 ? d_gbps : c_gbps)
        .add("gbps_remote", op == 0 ? d_remote : c_remote)
        .add("local_traffic", "included in gbps")
        .add("nvl_gbps", op == 0 ? d_nvl : c_nvl)
        .add("ceiling_gbps", b.ceiling)
        .add("nvl_fraction_of_ceiling", (op == 0 ? d_nvl : c_nvl) / b.ceiling)
        .add("ceiling_at_sms_gbps", b.ceiling_at[sms])
        .add("dtype", op == 0 ? "fp8_e4m3+fp32_per128" : "bf16")
        .add("baseline", "nccl")
        .add("baseline_time_us", pt.nccl.us)
        .add("baseline_timing", pt.nccl.timing)
        .add("baseline_eager_us", pt.nccl.eager_us)
        .add("variant", b.config.variant)
        .add("baseline_gbps_remote", tr.remote_rows_per_rank * pt.logical_row / pt.nccl.us / 1e3);
    append_result(b.config.out, "ep", line);
  }
  const double ceil_sms = b.ceiling_at[sms];
  rows.push_back({pt.shape_name, "dispatch", T, sms, d_us, d_gbps, d_nvl, b.ceiling, ceil_sms, pt.nccl.us});
  rows.push_back({pt.shape_name, "combine", T, sms, c_us, c_gbps, c_nvl, b.ceiling, ceil_sms, pt.nccl.us});
}

// Every token count and SM count of one shape, on an EP buffer sized for it.
void run_shape(EpBench& b, const std::string& shape_name, std::vector<Row>& rows) {
  const int R = b.R;
  const MoeShape shape = named_shape(shape_name, R, b.T_max);
  EpBufferConfig cfg;
  cfg.num_max_tokens_per_rank = b.T_max, cfg.hidden = shape.hidden, cfg.num_topk = shape.num_topk;
  cfg.num_experts = shape.num_experts, cfg.dtype = EpDtype::kFp8E4m3, cfg.scales = EpScales::kFp32Per128;
  EpBuffer buffer(*b.comm, cfg);
  Point pt;
  pt.shape_name = shape_name, pt.H = cfg.hidden;
  const int K = cfg.num_topk, xb = buffer.x_row_bytes(), sb = buffer.scale_row_bytes();
  pt.logical_row = size_t(xb) + sb + size_t(K) * (8 + 4);
  pt.record = layout::TokenRecord(pt.H, K, layout::TokenDtype::kFp8E4m3, sb).stride;  // pushed bytes
  const std::vector<RankData> data = allocate_rank_data(b, buffer, cfg, pt.logical_row);
  for (const int T : b.config.token_list) {
    std::vector<EpDispatchArgs> dargs(R);
    std::vector<EpHandle> handles(R);
    pt.T = T;
    pt.traffic = dispatch_once(b, buffer, cfg, data, T, dargs, handles);
    pt.nccl = time_nccl(b, data, pt.traffic, pt.logical_row, T);
    for (const int sms : b.config.sm_list) time_ep_point(b, buffer, data, pt, sms, dargs, handles, rows);
  }
  free_rank_data(b, data);
}

void print_table(const std::vector<Row>& rows) {
  std::printf("\n%-6s %-9s %6s %4s %10s %9s %9s %7s %8s %10s\n", "shape", "op", "tokens", "sms", "time_us", "GB/s",
              "nvl_GB/s", "%ceil", "%ceilSM", "nccl_us");
  for (const auto& r : rows)
    std::printf("%-6s %-9s %6d %4d %10.2f %9.1f %9.1f %6.1f%% %7.1f%% %10.2f\n", r.shape.c_str(), r.op.c_str(),
                r.tokens, r.sms, r.time_us, r.gbps, r.nvl_gbps, 100.0 * r.nvl_gbps / r.ceiling,
                100.0 * r.nvl_gbps / r.ceiling_sms, r.nccl_us);
}

int run_ep_bench(int argc, char** argv) {
  cli::Args args("bench ep", "EP dispatch/combine vs the peer-copy ceiling and NCCL all-to-all");
  args.option("out", "bench/results", "directory of the JSON-lines result file")
      .option("shapes", "v3,flash", "shapes (v3, flash, pro, tiny)")
      .option("tokens", "128,512,4096,8192", "tokens per rank")
      .list_range(1, cli::kMaxTokensPerRank)
      .option("sms", "8,16,24,32", "SMs (CTAs) per rank for dispatch and combine")
      .list_range(1, 1024)
      .option("reps", "30", "timed repetitions per point")
      .int_range(1, 100000)
      .option("variant", "ep4", "variant tag written to every result line (kernel generation)");
  if (!args.parse(argc, argv)) return 0;
  if (!require_hopper_gpu()) return 1;
  EpBench b;
  b.config = parse_flags(args);
  b.argc = argc, b.argv = argv;
  int num_gpus = 0;
  SYMMOE_CUDA_CHECK(cudaGetDeviceCount(&num_gpus));
  SYMMOE_CHECK(num_gpus >= 2, "bench", "bench ep needs at least 2 GPUs, found ", num_gpus);
  b.comm = Communicator::in_process(num_gpus);
  b.R = b.comm->num_ranks();
  b.T_max = *std::max_element(b.config.token_list.begin(), b.config.token_list.end());
  // NCCL: host API, one communicator per GPU in this process.
  b.nccl.resize(b.R), b.devs.resize(b.R);
  for (int r = 0; r < b.R; ++r) b.devs[r] = b.comm->placement(r).device;
  SYMMOE_NCCL_CHECK(ncclCommInitAll(b.nccl.data(), b.R, b.devs.data()));
  measure_ceilings(b);
  std::vector<Row> rows;
  for (const std::string& shape_name : b.config.shapes) run_shape(b, shape_name, rows);
  for (auto& c : b.nccl) ncclCommDestroy(c);
  print_table(rows);
  return 0;
}

}  // namespace
}  // namespace symmoe::bench

SYMMOE_BENCH(ep, "ep", "EP dispatch/combine vs tokens and SMs; peer-copy ceiling and NCCL all-to-all in the same run",
             symmoe::bench::run_ep_bench);
