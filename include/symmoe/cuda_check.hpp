// CUDA / NCCL check macros for host code: a failing call becomes a symmoe::Error naming the call and its site.
#pragma once

#include <cuda_runtime.h>

#include "symmoe/common.hpp"

#define SYMMOE_CUDA_CHECK(call)                                                                                     \
  do {                                                                                                              \
    const cudaError_t symmoe_err_ = (call);                                                                         \
    if (symmoe_err_ != cudaSuccess)                                                                                 \
      SYMMOE_FAIL("cuda", #call, " failed: ", cudaGetErrorName(symmoe_err_), " (", cudaGetErrorString(symmoe_err_), \
                  ")");                                                                                             \
  } while (0)

// After a kernel launch: report the launch error with the kernel's name (no sync; callers sync where they must).
#define SYMMOE_CUDA_CHECK_LAUNCH(kernel_name)                                                          \
  do {                                                                                                 \
    const cudaError_t symmoe_err_ = cudaGetLastError();                                                \
    if (symmoe_err_ != cudaSuccess)                                                                    \
      SYMMOE_FAIL("cuda", "launch of ", kernel_name, " failed: ", cudaGetErrorName(symmoe_err_), " (", \
                  cudaGetErrorString(symmoe_err_), ")");                                               \
  } while (0)
