// Multi-rank runtime on the GPU: barrier stress (no drift, no deadlock), all-to-all of known patterns (plain
// stores, bulk pull, bulk push, packed counters) checked bitwise, a planted stall that must raise PeerTimeout
// naming the stalled peer, repeated launches and CUDA-graph replay of the barrier kernel; the NVLink transport's
// domain view (stores through it land on the domain's ranks only).
// Backends: run plainly for the in-process backend (ranks = GPUs, and 8 virtual ranks); run under
// `symmoe launch -n 2 -- gpu_test_runtime` for the multi-process backend (one rank per process).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "common/compare.hpp"
#include "kernels/comm/barrier.cuh"
#include "kernels/comm/packed_counter.cuh"
#include "kernels/ptx/bulk.cuh"
#include "gpu/device_array.hpp"
#include "runtime/transport.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/runtime.hpp"

namespace symmoe {
namespace {

bool multi_process() { return multi_process_env_present(); }

using test::num_gpus;

// ranks == 0: one rank per GPU. Multi-process: the launcher's world.
std::unique_ptr<Communicator> make_comm(int ranks, int timeout_ms) {
  if (multi_process()) return Communicator::multi_process(bootstrap_config_from_env(), timeout_ms);
  return Communicator::in_process(ranks == 0 ? num_gpus() : ranks, timeout_ms);
}

std::vector<int> rank_counts() { return multi_process() ? std::vector<int>{0} : std::vector<int>{0, 8}; }

std::string rank_name(const ::testing::TestParamInfo<int>& info) {
  return info.param == 0 ? std::string(multi_process() ? "world" : "one_per_gpu")
                         : "virtual" + std::to_string(info.param);
}

template <typename T>
std::vector<T> download(const void* src, size_t count, int device) {
  std::vector<T> out(count);
  SYMMOE_CUDA_CHECK(cudaSetDevice(device));
  SYMMOE_CUDA_CHECK(cudaMemcpy(out.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

// ---------------- barrier stress ----------------
// Iteration i: CTA (peer % ctas) stores (i << 8 | rank) into mailbox[rank] of `peer`; barrier; every CTA checks
// its share of the local mailbox; barrier. A missing or early-released barrier shows up as a mismatch.
__global__ void stress_kernel(comm::SymBuffer sync_sym, layout::SyncArea area, layout::WaitContext ctx,
                              comm::SymBuffer data, int iterations, uint32_t* mismatches) {
  auto* mailbox = data.local<uint32_t>();
  const uint32_t num_ctas = gridDim.x;
  for (int i = 0; i < iterations; ++i) {
    const uint32_t stamp = (uint32_t(i) << 8) | data.rank;
    for (uint32_t peer = blockIdx.x + threadIdx.x * num_ctas; peer < data.num_ranks; peer += blockDim.x * num_ctas)
      ptx::st_relaxed_sys(data.map(mailbox + data.rank, peer), stamp);
    if (!comm::rank_barrier(sync_sym, area, ctx)) return;
    for (uint32_t src = blockIdx.x + threadIdx.x * num_ctas; src < data.num_ranks; src += blockDim.x * num_ctas)
      if (ptx::ld_acquire_sys(mailbox + src) != ((uint32_t(i) << 8) | src)) atomicAdd(mismatches, 1u);
    if (!comm::rank_barrier(sync_sym, area, ctx)) return;
  }
}

class RuntimeBarrier : public ::testing::TestWithParam<int> {};

TEST_P(RuntimeBarrier, Stress100kNoDriftNoDeadlock) {
  constexpr int kBarriers = 100000, kCtas = 4;
  auto comm = make_comm(GetParam(), 5000);
  const int R = comm->num_ranks();
  auto data = comm->alloc_symmetric(R * sizeof(uint32_t) + sizeof(uint32_t));  // mailbox[R] + mismatch count
  const auto start = std::chrono::steady_clock::now();
  for (const auto& p : comm->local_ranks()) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(p.device));
    auto* mismatches = static_cast<uint32_t*>(data.ptr(p.rank)) + R;
    stress_kernel<<<std::min(kCtas, p.num_sms), 32, 0, comm->stream(p.rank)>>>(
        comm::make_sym_buffer(comm->sync_buffer(), p.rank), comm->sync_area(p.rank), comm->wait_context(p.rank),
        comm::make_sym_buffer(data, p.rank), kBarriers / 2, mismatches);
    SYMMOE_CUDA_CHECK_LAUNCH("stress_kernel");
  }
  comm->synchronize();  // throws PeerTimeout on a deadlock
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("[stress] %d ranks, %d barriers with %d CTAs per rank: %.2f us per barrier (incl. launch)\n", R,
              kBarriers, kCtas, us / kBarriers);
  for (const auto& p : comm->local_ranks()) {
    const auto mismatches = download<uint32_t>(static_cast<uint32_t*>(data.ptr(p.rank)) + R, 1, p.device);
    EXPECT_EQ(mismatches[0], 0u) << "rank " << p.rank << ": mailbox values seen before their barrier";
    const auto area = comm->sync_area(p.rank);
    const auto slots = download<uint32_t>(area.barrier_slot(0, 0), 2 * R, p.device);
    const auto state = download<uint32_t>(area.state(), 3, p.device);
    EXPECT_EQ(state[0], uint32_t(kBarriers)) << "rank " << p.rank << ": barrier epoch drifted";
    EXPECT_EQ(state[1] & 0x7fffffffu, 0u) << "rank " << p.rank << ": grid-sync counter not back to a round start";
    EXPECT_EQ(state[2], 0u) << "rank " << p.rank << ": error count";
    // An even number of barriers leaves every slot at 0 (each parity saw +1/-1 pairs).
    EXPECT_TRUE(test::bitwise_equal(std::vector<uint32_t>(2 * R, 0u), slots,
                                    "barrier slots of rank " + std::to_string(p.rank)));
  }
}

TEST_P(RuntimeBarrier, RepeatedLaunchesAndGraphReplay) {
  constexpr int kIterations = 10, kLaunches = 100, kReplays = 100;
  auto comm = make_comm(GetParam(), 5000);
  for (int l = 0; l < kLaunches; ++l)
    for (const auto& p : comm->local_ranks()) launch_barrier(*comm, p.rank, 0, kIterations);
  comm->synchronize();
  std::vector<cudaGraphExec_t> execs;
  for (const auto& p : comm->local_ranks()) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(p.device));
    cudaGraph_t graph;
    SYMMOE_CUDA_CHECK(cudaStreamBeginCapture(comm->stream(p.rank), cudaStreamCaptureModeThreadLocal));
    launch_barrier(*comm, p.rank, 0, kIterations);
    SYMMOE_CUDA_CHECK(cudaStreamEndCapture(comm->stream(p.rank), &graph));
    cudaGraphExec_t exec;
    SYMMOE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    SYMMOE_CUDA_CHECK(cudaGraphDestroy(graph));
    execs.push_back(exec);
  }
  for (int r = 0; r < kReplays; ++r)
    for (size_t i = 0; i < execs.size(); ++i) {
      SYMMOE_CUDA_CHECK(cudaSetDevice(comm->local_ranks()[i].device));
      SYMMOE_CUDA_CHECK(cudaGraphLaunch(execs[i], comm->stream(comm->local_ranks()[i].rank)));
    }
  comm->synchronize();
  for (auto e : execs) SYMMOE_CUDA_CHECK(cudaGraphExecDestroy(e));
  for (const auto& p : comm->local_ranks()) {
    const auto state = download<uint32_t>(comm->sync_area(p.rank).state(), 3, p.device);
    EXPECT_EQ(state[0], uint32_t((kLaunches + kReplays) * kIterations)) << "rank " << p.rank << ": epoch";
    EXPECT_EQ(state[2], 0u) << "rank " << p.rank << ": error count";
  }
}

TEST_P(RuntimeBarrier, PlantedStallNamesThePeer) {
  constexpr int kTimeoutMs = 300;
  // A stall needs two ranks: on a one-GPU machine "one rank per GPU" becomes two virtual ranks on that GPU.
  const bool single_gpu = !multi_process() && GetParam() == 0 && num_gpus() < 2;
  auto comm = make_comm(single_gpu ? 2 : GetParam(), kTimeoutMs);
  const int R = comm->num_ranks();
  ASSERT_GE(R, 2) << "a stall needs two ranks";
  const int stalled = R - 1;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& p : comm->local_ranks())
    if (p.rank != stalled) launch_barrier(*comm, p.rank, 0, 3);
  bool thrown = false;
  try {
    comm->synchronize();
  } catch (const PeerTimeout& e) {
    thrown = true;
    std::printf("[stall] %s\n", e.what());
    EXPECT_EQ(e.peer(), stalled);
    EXPECT_NE(e.rank(), stalled);
    EXPECT_EQ(e.wait_site(), "barrier");
    EXPECT_EQ(e.expected(), 1u);  // first barrier: sign +, slot must read 1
    EXPECT_EQ(e.seen(), 0u);
    EXPECT_NE(std::string(e.what()).find("peer " + std::to_string(stalled) + " stalled"), std::string::npos);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const bool stalled_here = comm->local_ranks().size() == 1 && comm->local_ranks()[0].rank == stalled;
  EXPECT_EQ(thrown, !stalled_here) << "every rank that waited must report the stall";
  EXPECT_LT(ms, 10.0 * kTimeoutMs) << "the stall was reported too late";
  // Recovery: collective reset, then a normal barrier works again.
  comm->reset_sync_state();
  for (const auto& p : comm->local_ranks()) launch_barrier(*comm, p.rank, 0, 5);
  comm->synchronize();
}

INSTANTIATE_TEST_SUITE_P(Ranks, RuntimeBarrier, ::testing::ValuesIn(rank_counts()), rank_name);

// ---------------- all-to-all of known patterns ----------------
enum class Exchange : int { kStores = 0, kBulkPull = 1, kBulkPush = 2 };
constexpr uint32_t kChunkWords = 4096 + 64;  // 16 KiB + 256 B per (src, dst) pair; multiple of 4 words (16 B)
constexpr uint32_t kSmemWords = 2048;        // bulk staging per CTA

__host__ __device__ inline uint32_t pattern(uint32_t src, uint32_t dst, uint32_t word, uint32_t seed) {
  uint32_t x = (src * 0x9E3779B1u) ^ (dst * 0x85EBCA77u) ^ (word * 0xC2B2AE3Du) ^ seed;
  x ^= x >> 15, x *= 0x2C1B3C6Du, x ^= x >> 12;
  return x;
}

// Symmetric data buffer per rank: send[R][kChunkWords] | recv[R][kChunkWords] | packed counter | result word.
struct ExchangeLayout {
  uint32_t num_ranks;
  SYMMOE_HD size_t send_offset(uint32_t dst) const { return size_t(dst) * kChunkWords * 4; }
  SYMMOE_HD size_t recv_offset(uint32_t src) const { return (size_t(num_ranks) + src) * kChunkWords * 4; }
  SYMMOE_HD size_t counter_offset() const { return size_t(2) * num_ranks * kChunkWords * 4; }
  SYMMOE_HD size_t result_offset() const { return counter_offset() + 8; }
  SYMMOE_HD size_t num_bytes() const { return result_offset() + 8; }
};

__global__ void exchange_kernel(comm::SymBuffer sync_sym, layout::SyncArea area, layout::WaitContext ctx,
                                comm::SymBuffer data, Exchange method, uint32_t seed) {
  __shared__ alignas(128) uint32_t stage[kSmemWords];
  __shared__ alignas(8) uint64_t bar;
  const ExchangeLayout lay{data.num_ranks};
  const uint32_t me = data.rank, R = data.num_ranks;
  // Send chunks hold the pattern for their destination (used by the pull).
  for (uint32_t dst = blockIdx.x; dst < R; dst += gridDim.x)
    for (uint32_t w = threadIdx.x; w < kChunkWords; w += blockDim.x)
      data.local<uint32_t>(lay.send_offset(dst))[w] = pattern(me, dst, w, seed);
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_mbarrier_init_cluster();
  }
  ptx::fence_proxy_async_global();  // generic writes above -> peers' bulk reads after the barrier
  if (!comm::rank_barrier(sync_sym, area, ctx)) return;
  uint32_t phase = 0;
  for (uint32_t peer = blockIdx.x; peer < R; peer += gridDim.x) {
    if (method == Exchange::kStores) {  // push with plain 16-byte stores
      auto* dst = reinterpret_cast<uint4*>(data.map(data.local<uint32_t>(lay.recv_offset(me)), peer));
      for (uint32_t v = threadIdx.x; v < kChunkWords / 4; v += blockDim.x)
        dst[v] = make_uint4(pattern(me, peer, 4 * v, seed), pattern(me, peer, 4 * v + 1, seed),
                            pattern(me, peer, 4 * v + 2, seed), pattern(me, peer, 4 * v + 3, seed));
    } else {
      for (uint32_t w0 = 0; w0 < kChunkWords; w0 += kSmemWords) {
        const uint32_t words = min(kSmemWords, kChunkWords - w0);
        if (method == Exchange::kBulkPull) {  // peer's send[me] -> smem -> my recv[peer]
          if (threadIdx.x == 0) {
            ptx::mbarrier_arrive_expect_tx(&bar, words * 4);
            ptx::bulk_load_global_to_shared(stage, data.map(data.local<uint32_t>(lay.send_offset(me)) + w0, peer),
                                            words * 4, &bar);
          }
          int ok = 1;
          if (threadIdx.x == 0)
            ok = comm::wait_mbarrier_parity(ctx, layout::WaitSite::kBulkCopy, int(peer), &bar, phase);
          if (!__syncthreads_and(ok)) return;
          phase ^= 1;
          for (uint32_t w = threadIdx.x; w < words; w += blockDim.x)
            data.local<uint32_t>(lay.recv_offset(peer))[w0 + w] = stage[w];
          __syncthreads();
        } else {  // kBulkPush: pattern -> smem -> peer's recv[me]
          for (uint32_t w = threadIdx.x; w < words; w += blockDim.x) stage[w] = pattern(me, peer, w0 + w, seed);
          ptx::fence_proxy_async_shared_cta();
          __syncthreads();
          if (threadIdx.x == 0) {
            ptx::bulk_store_shared_to_global(data.map(data.local<uint32_t>(lay.recv_offset(me)) + w0, peer), stage,
                                             words * 4);
            ptx::bulk_commit_group();
            ptx::bulk_wait_group<0>();
            ptx::fence_proxy_async_global();
          }
          __syncthreads();
        }
      }
    }
    // One arrival per (src, dst) pair on the destination's packed counter, count = words delivered.
    __syncthreads();
    if (threadIdx.x == 0 && method != Exchange::kBulkPull) {
      ptx::fence_acq_rel_sys();
      comm::packed_arrive_sys(data.map(data.local<uint64_t>(lay.counter_offset()), peer), kChunkWords);
    }
  }
  if (method != Exchange::kBulkPull && blockIdx.x == 0 && threadIdx.x == 0) {
    uint64_t value = 0;
    auto* counter = data.local<uint64_t>(lay.counter_offset());
    if (comm::packed_wait_arrivals(ctx, -1, counter, R, &value)) {
      *data.local<uint64_t>(lay.result_offset()) = value;
      *counter = 0;  // consumer clears; the barrier below orders it before the next call's arrivals
    }
  }
  comm::rank_barrier(sync_sym, area, ctx);
}

class RuntimeExchange : public ::testing::TestWithParam<int> {};

TEST_P(RuntimeExchange, AllToAllKnownPatternsBitwise) {
  auto comm = make_comm(GetParam(), 5000);
  const uint32_t R = uint32_t(comm->num_ranks());
  const ExchangeLayout lay{R};
  auto data = comm->alloc_symmetric(lay.num_bytes());
  const char* names[] = {"stores", "bulk_pull", "bulk_push"};
  for (int m = 0; m < 3; ++m) {
    for (int call = 0; call < 2; ++call) {  // twice: the packed counter must be cleared by its consumer
      const uint32_t seed = 0x1234u + 977u * uint32_t(m) + 131u * uint32_t(call);
      for (const auto& p : comm->local_ranks()) {  // poison receive rows and the result word
        SYMMOE_CUDA_CHECK(cudaSetDevice(p.device));
        SYMMOE_CUDA_CHECK(cudaMemset(static_cast<uint8_t*>(data.ptr(p.rank)) + lay.recv_offset(0), 0xAB,
                                     lay.counter_offset() - lay.recv_offset(0)));
        SYMMOE_CUDA_CHECK(cudaMemset(static_cast<uint8_t*>(data.ptr(p.rank)) + lay.result_offset(), 0xFF, 8));
        SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
      }
      comm->host_barrier();
      for (const auto& p : comm->local_ranks()) {
        SYMMOE_CUDA_CHECK(cudaSetDevice(p.device));
        exchange_kernel<<<std::min(4, p.num_sms), 128, 0, comm->stream(p.rank)>>>(
            comm::make_sym_buffer(comm->sync_buffer(), p.rank), comm->sync_area(p.rank), comm->wait_context(p.rank),
            comm::make_sym_buffer(data, p.rank), Exchange(m), seed);
        SYMMOE_CUDA_CHECK_LAUNCH("exchange_kernel");
      }
      comm->synchronize();
      for (const auto& p : comm->local_ranks()) {
        const auto* base = static_cast<const uint8_t*>(data.ptr(p.rank));
        const auto got = download<uint32_t>(base + lay.recv_offset(0), size_t(R) * kChunkWords, p.device);
        std::vector<uint32_t> expected(got.size());
        for (uint32_t src = 0; src < R; ++src)
          for (uint32_t w = 0; w < kChunkWords; ++w) expected[src * kChunkWords + w] = pattern(src, p.rank, w, seed);
        ASSERT_TRUE(test::bitwise_equal(expected, got,
                                        std::string(names[m]) + " rank " + std::to_string(p.rank) + " (index / " +
                                            std::to_string(kChunkWords) + " = source)"));
        if (Exchange(m) != Exchange::kBulkPull) {
          const auto result = download<uint64_t>(base + lay.result_offset(), 1, p.device)[0];
          EXPECT_EQ(comm::packed_arrivals(result), R) << names[m] << " rank " << p.rank << ": arrivals";
          EXPECT_EQ(comm::packed_count(result), R * kChunkWords) << names[m] << " rank " << p.rank << ": count";
          EXPECT_EQ(download<uint64_t>(base + lay.counter_offset(), 1, p.device)[0], 0u) << "counter not cleared";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RuntimeExchange, ::testing::ValuesIn(rank_counts()), rank_name);

// ---------------- transport boundary ----------------
// Each rank stores (tag | its global rank) into slot [its team index] of every team peer's mailbox, through the
// NvlinkTransport's domain view (team-local peer indices).
__global__ void domain_push_kernel(comm::SymBuffer team, uint32_t global_rank) {
  auto* mailbox = team.local<uint32_t>();
  for (uint32_t peer = threadIdx.x; peer < team.num_ranks; peer += blockDim.x)
    *team.map(mailbox + team.rank, peer) = 0xA5000000u | global_rank;
}

TEST(RuntimeTransport, NvlinkDomainViewReachesItsDomainOnly) {
  auto comm = make_comm(multi_process() ? 0 : 8, 5000);
  const int R = comm->num_ranks();
  for (int domains = 1; domains <= R; domains *= 2) {
    if (R % domains) continue;
    const runtime::NvlinkTransport nvlink(runtime::TransportTopology::make(R, domains));
    const auto& topo = nvlink.topology();
    auto data = comm->alloc_symmetric(layout::kMaxRanks * sizeof(uint32_t));
    for (const auto& p : comm->local_ranks()) {
      const comm::SymBuffer view = nvlink.device_view(data, p.rank);
      if (domains == 1) {  // one domain: exactly the global view
        const comm::SymBuffer global = comm::make_sym_buffer(data, p.rank);
        ASSERT_EQ(0, std::memcmp(&view, &global, sizeof view)) << "rank " << p.rank;
      }
      SYMMOE_CUDA_CHECK(cudaSetDevice(p.device));
      domain_push_kernel<<<1, 32, 0, comm->stream(p.rank)>>>(view, uint32_t(p.rank));
      SYMMOE_CUDA_CHECK_LAUNCH("domain_push_kernel");
    }
    comm->synchronize();
    comm->host_barrier();
    for (const auto& p : comm->local_ranks()) {
      const auto got = download<uint32_t>(data.ptr(p.rank), layout::kMaxRanks, p.device);
      std::vector<uint32_t> expected(layout::kMaxRanks, 0u);
      for (int l = 0; l < topo.ranks_per_domain(); ++l)
        expected[l] = 0xA5000000u | uint32_t(topo.rank_of(topo.domain_of(p.rank), l));
      ASSERT_TRUE(test::bitwise_equal(
          expected, got,
          "mailbox of rank " + std::to_string(p.rank) + " with " + std::to_string(domains) + " domains"));
    }
    comm->host_barrier();
  }
}

}  // namespace
}  // namespace symmoe
