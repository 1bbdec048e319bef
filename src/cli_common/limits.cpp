#include "cli_common/limits.hpp"

#include "symmoe/version.hpp"  // SYMMOE_WITH_CUDA

#if SYMMOE_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "symmoe/common.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::cli {

// NOTES: H200 SXM: 132 SMs, 141 GB (143,771,369,472 bytes as cudaGetDeviceProperties reports it).
constexpr uint64_t kH200MemoryBytes = 143771369472ull;

GpuLimits gpu_limits() {
#if SYMMOE_WITH_CUDA
  int n = 0;
  cudaDeviceProp prop{};
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0 && cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    return {prop.multiProcessorCount, uint64_t(prop.totalGlobalMem), std::string(prop.name) + " (GPU 0)"};
  cudaGetLastError();  // "no device" is not an error here
#endif
  return {plan::hopper::kDefaultNumSms, kH200MemoryBytes, "H200 (no GPU visible: assumed)"};
}

std::string memory_warning(uint64_t bytes_per_rank, const GpuLimits& limits) {
  if (bytes_per_rank <= limits.memory_bytes) return "";
  return detail::concat("warning: one rank needs ", plan::format_bytes(bytes_per_rank), " of buffers, more than the ",
                        plan::format_bytes(limits.memory_bytes), " of the ", limits.name,
                        ": lower --tokens or use more ranks");
}

}  // namespace symmoe::cli
