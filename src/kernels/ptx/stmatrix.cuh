// Warp-wide matrix stores to shared memory (stmatrix, sm_90). One function per instruction.
#pragma once

#include <cstdint>

#include "kernels/ptx/mbarrier.cuh"

namespace symmoe::ptx {

// Four 8 x 8 b16 matrices: register j of lane l holds row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 (low half
// first) of matrix j; lanes 8j .. 8j + 7 give the shared-memory addresses of matrix j's rows 0-7 (16 bytes each,
// 16-byte aligned).
__device__ __forceinline__ void stmatrix_x4(void* smem_row, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.x4.m8n8.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr(smem_row)), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

}  // namespace symmoe::ptx
