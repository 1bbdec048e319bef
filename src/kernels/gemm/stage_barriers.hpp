// The full/empty mbarrier pair of every pipeline stage, 2 x kNumStages mbarriers from `bars` (full[0..S), then
// empty[0..S)): the ring of the one-batch and swap-AB cores (core_smem_layout.hpp, swap_ab_smem_layout.hpp).
#pragma once

#include <cstdint>

#include "kernels/ptx/mbarrier.cuh"

namespace symmoe::gemm::kernel {

template <int kNumStages>
struct StageBarriers {
  uint64_t* bars;
  __device__ uint64_t* full(int s) const { return bars + s; }
  __device__ uint64_t* empty(int s) const { return bars + kNumStages + s; }
  // One thread, before the CTA's first sync: full completes on the producer's arrive + the stage's TMA bytes, empty
  // on consumer_arrivals arrives (one per consumer warp of every CTA of the cluster).
  __device__ void init(uint32_t consumer_arrivals) const {
    for (int s = 0; s < kNumStages; ++s) {
      ptx::mbarrier_init(full(s), 1);
      ptx::mbarrier_init(empty(s), consumer_arrivals);
    }
    ptx::fence_mbarrier_init_cluster();
  }
};

}  // namespace symmoe::gemm::kernel
