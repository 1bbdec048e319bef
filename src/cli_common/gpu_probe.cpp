#include "cli_common/gpu_probe.hpp"

#include <dlfcn.h>

#include <cstdlib>

#include "symmoe/common.hpp"
#include "symmoe/version.hpp"

#if SYMMOE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace symmoe::cli {

std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return detail::concat(version / 1000, ".", (version % 1000) / 10);
}

#if SYMMOE_WITH_CUDA

namespace {
// The CUDA runtime says "driver version is insufficient" both when the driver is too old and when there is none;
// the driver library tells the two apart.
bool driver_library_present() {
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!handle) return false;
  dlclose(handle);
  return true;
}
}  // namespace

GpuProbe probe_gpus() {
  GpuProbe p;
  cudaRuntimeGetVersion(&p.runtime_version);
  cudaDriverGetVersion(&p.driver_version);  // 0 (and success) without a driver
  const cudaError_t err = cudaGetDeviceCount(&p.num_gpus);
  cudaGetLastError();  // "no device" is an answer here, not an error to carry into later calls
  if (err == cudaSuccess && p.num_gpus > 0) return p;
  p.num_gpus = 0;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string visible_note = visible ? detail::concat(" (CUDA_VISIBLE_DEVICES=", visible, ")") : "";
  if (!driver_library_present())
    p.why_none = "no NVIDIA driver (libcuda.so.1 not found)";
  else if (err == cudaErrorInsufficientDriver)
    p.why_none = detail::concat("NVIDIA driver too old: it supports CUDA ", cuda_version_string(p.driver_version),
                                ", symmoe was built with CUDA ", cuda_version_string(p.runtime_version));
  else if (err == cudaErrorNoDevice || err == cudaSuccess)
    p.why_none = "no GPU visible" + visible_note;
  else
    p.why_none =
        detail::concat("no usable GPU: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")", visible_note);
  return p;
}

std::string hopper_problem(const GpuProbe& probe) {
  if (probe.num_gpus == 0) return probe.why_none;
  for (int d = 0; d < probe.num_gpus; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      cudaGetLastError();
      return detail::concat("GPU ", d, ": cudaGetDeviceProperties failed");
    }
    if (prop.major != 9) return detail::concat("GPU ", d, " is sm_", prop.major, prop.minor, " (", prop.name, ")");
  }
  return "";
}

#else  // CPU-only build

GpuProbe probe_gpus() {
  GpuProbe p;
  p.why_none = "symmoe was built without CUDA (CPU-only build)";
  return p;
}

std::string hopper_problem(const GpuProbe& probe) { return probe.why_none; }

#endif

int visible_gpu_count() { return probe_gpus().num_gpus; }

}  // namespace symmoe::cli
