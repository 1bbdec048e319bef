// Reproducer of the FP4 converter warps' per-stage slot hand-over, for compute-sanitizer racecheck (issue 21): one
// producer thread and one consumer warp pass a 2-stage ring of (slot word, 16-byte TMA payload) through
// raw_full / empty mbarriers, in two ways:
//   kGenericStoreTx:     the producer st.shared's the slot, then arrive.expect_tx + bulk copy of the payload (what
//                        the FP4 producers do: gemm/producer_fp4.cuh, mega/producer_fp4.cuh);
//   kGenericStoreArrive: the producer st.shared's the slot and arrives on raw_full with no transaction bytes (a
//                        phase completed by a thread arrive only; no payload).
// Each mode must hand over every round's value (this test, plain). Both are ordered by the mbarriers' release /
// acquire semantics; racecheck reports the slot's store vs the consumer's read in both modes, i.e. it does not order
// generic shared-memory accesses through mbarrier phases at all (docs/notes/gemm.md has the device run):
//   compute-sanitizer --tool racecheck build/gpu_test_racecheck_slot --gtest_filter='*GenericStoreArrive*'
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/device_array.hpp"
#include "kernels/ptx/bulk.cuh"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/sync.cuh"
#include "symmoe/cuda_check.hpp"

namespace {

enum class Mode { kGenericStoreTx, kGenericStoreArrive };
constexpr int kStages = 2, kRounds = 64;

struct alignas(16) RingSmem {
  int4 slot[kStages];     // what the consumer reads
  int4 payload[kStages];  // TMA-written (kGenericStoreTx)
  uint64_t raw_full[kStages], empty[kStages];
};

// 64 threads: thread 0 produces, warp 1 consumes (lane 0 writes out[round] = slot + payload word).
template <Mode kMode>
__global__ void slot_ring_kernel(const int4* payload, int* out) {
  using namespace symmoe;
  __shared__ RingSmem sm;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) ptx::mbarrier_init(&sm.raw_full[s], 1), ptx::mbarrier_init(&sm.empty[s], 1);
    ptx::fence_mbarrier_init_cluster();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int round = 0; round < kRounds; ++round) {
      const int s = round % kStages;
      const uint32_t phase = (round / kStages) & 1;
      ptx::mbarrier_wait_parity(&sm.empty[s], phase ^ 1);
      if constexpr (kMode == Mode::kGenericStoreTx) {
        sm.slot[s] = make_int4(round, 0, 0, 0);
        ptx::mbarrier_arrive_expect_tx(&sm.raw_full[s], 16);
        ptx::bulk_load_global_to_shared(&sm.payload[s], payload + round, 16, &sm.raw_full[s]);
      } else {
        sm.slot[s] = make_int4(round, 0, 0, 0);
        ptx::mbarrier_arrive(&sm.raw_full[s]);
      }
    }
  } else if (threadIdx.x >= 32) {
    const int lane = threadIdx.x % 32;
    for (int round = 0; round < kRounds; ++round) {
      const int s = round % kStages;
      ptx::mbarrier_wait_parity(&sm.raw_full[s], (round / kStages) & 1);
      const int v = sm.slot[s].x + (kMode == Mode::kGenericStoreArrive ? 0 : sm.payload[s].x);
      __syncwarp();
      if (lane == 0) {
        out[round] = v;
        ptx::mbarrier_arrive(&sm.empty[s]);
      }
    }
  }
}

template <Mode kMode>
void run_mode() {
  std::vector<int4> host(kRounds);
  for (int r = 0; r < kRounds; ++r) host[r] = make_int4(1000 * r, 0, 0, 0);
  symmoe::test::DeviceArray<int4> payload(host);
  symmoe::test::DeviceArray<int> out(kRounds);
  out.poison();
  slot_ring_kernel<kMode><<<1, 64>>>(payload.ptr, out.ptr);
  SYMMOE_CUDA_CHECK(cudaGetLastError());
  SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = out.download();
  for (int r = 0; r < kRounds; ++r)
    EXPECT_EQ(got[r], kMode == Mode::kGenericStoreArrive ? r : 1001 * r) << "round " << r;
}

TEST(RacecheckSlot, GenericStoreTx) { run_mode<Mode::kGenericStoreTx>(); }
TEST(RacecheckSlot, GenericStoreArrive) { run_mode<Mode::kGenericStoreArrive>(); }

}  // namespace
