// Prefix sums of ints inside one kernel: one warp (shuffles) and one CTA (warp sums through shared memory). The EP
// notify/copy stage and the fused kernel's count -> segment step use them.
#pragma once

namespace symmoe::kernel {

// Inclusive prefix sum of one int per lane over the warp (all 32 lanes call it).
__device__ __forceinline__ int warp_inclusive_sum(int value) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const int below = __shfl_up_sync(0xffffffffu, value, offset);
    if (lane >= offset) value += below;
  }
  return value;
}

// Exclusive prefix sum of one int per thread over the CTA (blockDim.x a multiple of 32, <= 1024); *total gets the
// sum. Every thread must call it. scratch: 32 ints of shared memory.
__device__ __forceinline__ int cta_exclusive_scan(int value, int* scratch, int* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
  const int inclusive = warp_inclusive_sum(value);
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) scratch[lane] = warp_inclusive_sum(lane < num_warps ? scratch[lane] : 0);  // over the warps
  __syncthreads();
  const int result = (warp ? scratch[warp - 1] : 0) + inclusive - value;
  *total = scratch[num_warps - 1];
  __syncthreads();  // scratch reusable
  return result;
}

}  // namespace symmoe::kernel
