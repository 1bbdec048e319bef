// `symmoe bench p2p`: NVLink ceilings for symmoe's kernels, in one run:
//   push   SM stores into a peer's memory (16-byte, through SymBuffer::map), vs SM count, every ordered pair;
//   pull   SM loads from a peer's memory into local memory, same sweep;
//   barrier       cross-rank barrier round trip, one CTA per rank (what a kernel pays per NVLink barrier);
//   barrier_grid  whole-rank barrier (grid sync + cross-rank + grid sync) with the rank's SM share of CTAs;
//   flag_rtt      one-thread flag ping-pong between ranks 0 and 1, relaxed stores (the latency floor the barrier
//                 is judged by); flag_rtt_release the same with release stores.
// In-process (default: one rank per GPU) or under `symmoe launch -n N -- symmoe bench p2p` (one rank per process).
// Times: push/pull median of CUDA-event-timed repetitions; latencies from %globaltimer inside one kernel.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench.hpp"
#include "cli_common/limits.hpp"
#include "kernels/comm/barrier.cuh"
#include "symmoe/cuda_check.hpp"
#include "symmoe/runtime.hpp"

namespace symmoe::bench {
namespace {

constexpr int kCopyThreads = 512;
constexpr int kUnroll = 4;  // 16-byte accesses in flight per thread (pull is latency bound)

// dst[i] = src[i] over `num_vec` uint4; one of src/dst is a peer pointer (already mapped).
__global__ void __launch_bounds__(kCopyThreads)
    copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t num_vec) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < num_vec; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < num_vec; i += stride) dst[i] = src[i];
}

// Latency kernels write their in-kernel elapsed time (ns over `iters`) to *elapsed_ns on CTA 0.
__global__ void barrier_block_kernel(comm::SymBuffer sym, layout::SyncArea area, layout::WaitContext ctx, int iters,
                                     uint64_t* elapsed_ns) {
  if (!comm::cross_rank_barrier_block(sym, area, ctx)) return;  // align the ranks
  const uint64_t t0 = ptx::globaltimer_ns();
  for (int i = 0; i < iters; ++i)
    if (!comm::cross_rank_barrier_block(sym, area, ctx)) return;
  if (threadIdx.x == 0) *elapsed_ns = ptx::globaltimer_ns() - t0;
}

__global__ void barrier_grid_kernel(comm::SymBuffer sym, layout::SyncArea area, layout::WaitContext ctx, int iters,
                                    uint64_t* elapsed_ns) {
  if (!comm::rank_barrier(sym, area, ctx)) return;
  const uint64_t t0 = ptx::globaltimer_ns();
  for (int i = 0; i < iters; ++i)
    if (!comm::rank_barrier(sym, area, ctx)) return;
  if (blockIdx.x == 0 && threadIdx.x == 0) *elapsed_ns = ptx::globaltimer_ns() - t0;
}

// Rank 0 sends i to rank 1, rank 1 echoes it; flags[0] is the local mailbox. kRelease = false: relaxed stores,
// the raw NVLink latency floor (1.38 us round trip: bench/results/2026-11-29-nvidia-h200-x2-p2p.jsonl, flag_rtt);
// true: st.release.sys, a real handoff.
template <bool kRelease>
__global__ void flag_pingpong_kernel(comm::SymBuffer flags, layout::WaitContext ctx, int iters, uint64_t* elapsed_ns) {
  auto* mailbox = flags.local<uint32_t>();
  const bool initiator = flags.rank == 0;
  const uint32_t peer = initiator ? 1 : 0;
  auto send = [&](uint32_t v) {
    if (kRelease)
      ptx::st_release_sys(flags.map(mailbox, peer), v);
    else
      ptx::st_relaxed_sys(flags.map(mailbox, peer), v);
  };
  const uint64_t t0 = ptx::globaltimer_ns();
  for (uint32_t i = 1; i <= uint32_t(iters); ++i) {
    if (initiator) send(i);
    if (!comm::wait_eq_sys(ctx, layout::WaitSite::kFlag, int(peer), mailbox, i)) return;
    if (!initiator) send(i);
  }
  *elapsed_ns = ptx::globaltimer_ns() - t0;
}

struct Row {
  std::string op;
  int src, dst, sms;
  double time_us, gbps;
};

// The ranks and the one symmetric allocation every measurement uses. Per rank: [0, bytes) source region,
// [bytes, 2 bytes) destination region, then 4 KiB of flags/timings.
struct P2pBench {
  std::unique_ptr<Communicator> comm;
  SymmetricBuffer data;
  size_t bytes = 0;
  int R = 0, reps = 0, iters = 0;
  std::string out;
  int argc = 0;
  char** argv = nullptr;
  std::vector<Row> rows;

  void on(int rank) const { SYMMOE_CUDA_CHECK(cudaSetDevice(comm->placement(rank).device)); }
  uint64_t* timing_word(int rank) const {
    return reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(data.ptr(rank)) + 2 * bytes + 64);
  }
  void record(const Row& row) {
    rows.push_back(row);
    auto line = common_fields("p2p", argc, argv);
    line.add("op", row.op).add("shape", "bytes=" + std::to_string(bytes)).add("ranks", R).add("tokens", 0);
    line.add("sms", row.sms).add("time_us", row.time_us).add("src", row.src).add("dst", row.dst);
    line.add("backend", comm->backend() == Backend::kInProcess ? "in_process" : "multi_process");
    if (row.gbps > 0) line.add("gbps", row.gbps);
    append_result(out, "p2p", line);
  }
};

// Push and pull between every ordered pair, at every SM count.
void push_pull(P2pBench& b, const std::vector<int>& sm_list) {
  Communicator& comm = *b.comm;
  const size_t bytes = b.bytes;
  for (int a = 0; a < b.R; ++a) {
    for (int peer = 0; peer < b.R; ++peer) {
      if (a == peer) continue;
      if (comm.is_local(a)) {
        b.on(a);
        const auto sym = comm::make_sym_buffer(b.data, a);
        auto* local = static_cast<uint8_t*>(b.data.ptr(a));
        for (int sms : sm_list) {
          sms = std::min(sms, comm.placement(a).num_sms);
          for (const char* op : {"push", "pull"}) {
            const bool push = op[1] == 'u' && op[2] == 's';
            const uint4* src = push ? reinterpret_cast<const uint4*>(local)
                                    : reinterpret_cast<const uint4*>(sym.map(local, uint32_t(peer)));
            uint4* dst = push ? reinterpret_cast<uint4*>(sym.map(local + bytes, uint32_t(peer)))
                              : reinterpret_cast<uint4*>(local + bytes);
            const double us = median_time_us(
                comm.stream(a),
                [&] {
                  copy_kernel<<<sms, kCopyThreads, 0, comm.stream(a)>>>(src, dst, bytes / 16);
                  SYMMOE_CUDA_CHECK_LAUNCH("copy_kernel");
                },
                3, b.reps);
            b.record(Row{op, a, peer, sms, us, double(bytes) / us / 1e3});
          }
        }
      }
      comm.host_barrier();  // the peer's memory stays untouched by its own process meanwhile
    }
  }
}

// Every local rank launches, then rank 0's (or the lowest local rank's) time is read.
template <typename Launch>
void latency(P2pBench& b, const std::string& op, int ctas, int n, Launch launch) {
  Communicator& comm = *b.comm;
  for (const auto& p : comm.local_ranks()) {
    b.on(p.rank);
    SYMMOE_CUDA_CHECK(cudaMemset(static_cast<uint8_t*>(b.data.ptr(p.rank)) + 2 * b.bytes, 0, 4096));
    SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  comm.host_barrier();
  for (const auto& p : comm.local_ranks()) {
    b.on(p.rank);
    launch(p.rank);
  }
  comm.synchronize();
  const int rank = comm.local_ranks()[0].rank;
  if (op.rfind("flag_rtt", 0) == 0 && rank > 1) return;
  uint64_t ns = 0;
  b.on(rank);
  SYMMOE_CUDA_CHECK(cudaMemcpy(&ns, b.timing_word(rank), sizeof ns, cudaMemcpyDeviceToHost));
  b.record(Row{op, rank, -1, ctas, ns / 1000.0 / n, 0});
}

// Barrier (one CTA, whole rank) and flag round-trip latencies.
void latencies(P2pBench& b) {
  Communicator& comm = *b.comm;
  const int iters = b.iters;
  latency(b, "barrier", 1, iters, [&](int rank) {
    barrier_block_kernel<<<1, 32, 0, comm.stream(rank)>>>(comm::make_sym_buffer(comm.sync_buffer(), rank),
                                                          comm.sync_area(rank), comm.wait_context(rank), iters,
                                                          b.timing_word(rank));
    SYMMOE_CUDA_CHECK_LAUNCH("barrier_block_kernel");
  });
  const int share = comm.placement(comm.local_ranks()[0].rank).num_sms;
  latency(b, "barrier_grid", share, iters / 4, [&](int rank) {
    barrier_grid_kernel<<<comm.placement(rank).num_sms, 32, 0, comm.stream(rank)>>>(
        comm::make_sym_buffer(comm.sync_buffer(), rank), comm.sync_area(rank), comm.wait_context(rank), iters / 4,
        b.timing_word(rank));
    SYMMOE_CUDA_CHECK_LAUNCH("barrier_grid_kernel");
  });
  for (const bool release : {false, true}) {
    latency(b, release ? "flag_rtt_release" : "flag_rtt", 1, iters, [&](int rank) {
      if (rank > 1) return;
      // The mailbox is the timing area's first word (zeroed above); the timing word sits 64 bytes further.
      comm::SymBuffer flags = comm::make_sym_buffer(b.data, rank);
      flags.base += int64_t(2 * b.bytes);
      if (release)
        flag_pingpong_kernel<true>
            <<<1, 1, 0, comm.stream(rank)>>>(flags, comm.wait_context(rank), iters, b.timing_word(rank));
      else
        flag_pingpong_kernel<false>
            <<<1, 1, 0, comm.stream(rank)>>>(flags, comm.wait_context(rank), iters, b.timing_word(rank));
      SYMMOE_CUDA_CHECK_LAUNCH("flag_pingpong_kernel");
    });
  }
}

int run_p2p(int argc, char** argv) {
  cli::Args args("bench p2p", "NVLink push/pull bandwidth between every pair of ranks vs SM count; barrier latency.");
  args.option("ranks", "0", "in-process ranks (0: one per GPU); ignored under symmoe launch")
      .int_range(0, cli::kMaxRanks)
      .option("sms", "8,16,32,64,132", "SM counts (CTAs) for push/pull; capped at the rank's SM share")
      .option("bytes", "268435456", "bytes per push/pull")
      .option("reps", "20", "timed repetitions (median)")
      .int_range(1, 100000)
      .option("iters", "20000", "barriers / round trips per latency kernel")
      .int_range(1, 100000000)
      .option("out", "bench/results", "directory of the JSON-lines result file");
  if (!args.parse(argc, argv)) return 0;
  if (!require_hopper_gpu()) return 1;
  int num_gpus = 0;
  SYMMOE_CUDA_CHECK(cudaGetDeviceCount(&num_gpus));
  P2pBench b;
  b.comm = Communicator::from_env(args.integer("ranks") > 0 ? args.integer("ranks") : num_gpus);
  b.R = b.comm->num_ranks();
  SYMMOE_CHECK(b.R >= 2, "bench", "p2p needs at least 2 ranks, got ", b.R);
  b.bytes = size_t(std::stoll(args.str("bytes")));
  SYMMOE_CHECK(b.bytes % 16 == 0 && b.bytes > 0, "bench", "--bytes must be a positive multiple of 16, got ", b.bytes);
  b.reps = args.integer("reps"), b.iters = args.integer("iters");
  b.data = b.comm->alloc_symmetric(2 * b.bytes + 4096);
  b.out = args.str("out"), b.argc = argc, b.argv = argv;
  push_pull(b, args.int_list("sms"));
  latencies(b);
  std::printf("\n%-16s %4s %4s %5s %11s %9s\n", "op", "src", "dst", "sms", "time_us", "GB/s");
  for (const auto& r : b.rows)
    std::printf("%-16s %4d %4d %5d %11.3f %9s\n", r.op.c_str(), r.src, r.dst, r.sms, r.time_us,
                r.gbps > 0 ? std::to_string(int(r.gbps + 0.5)).c_str() : "-");
  return 0;
}

}  // namespace
}  // namespace symmoe::bench

SYMMOE_BENCH(p2p, "p2p", "NVLink push/pull bandwidth per rank pair vs SMs, barrier and flag latency",
             symmoe::bench::run_p2p);
