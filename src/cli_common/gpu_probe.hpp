// What this machine offers the CLI on the GPU side: the visible GPUs, or one plain sentence saying why there are
// none ("no NVIDIA driver (libcuda.so.1 not found)", "no GPU visible (CUDA_VISIBLE_DEVICES=-1)", ...). CPU-only
// builds answer that they were built without CUDA. Used by `info`, `run` (GPU or CPU path) and `bench`.
#pragma once

#include <string>

namespace symmoe::cli {

struct GpuProbe {
  int num_gpus = 0;
  std::string why_none;     // empty when num_gpus > 0
  int runtime_version = 0;  // CUDA runtime linked into symmoe (e.g. 13000); 0 in CPU-only builds
  int driver_version = 0;   // CUDA version the driver supports (e.g. 13000); 0 without a driver
};

GpuProbe probe_gpus();
int visible_gpu_count();

// Empty when there is at least one GPU and every visible GPU is Hopper (sm_90); otherwise the reason, e.g.
// "GPU 0 is sm_80 (NVIDIA A100-SXM4-80GB)" or the probe's why_none.
std::string hopper_problem(const GpuProbe& probe);

// "13.0" from a CUDA version number (13000); "none" for 0.
std::string cuda_version_string(int version);

}  // namespace symmoe::cli
