// `symmoe info`: what this machine offers symmoe: GPUs, SMs, memory, peer (NVLink) access, or "no GPU".
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "cli/command.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/env.hpp"

namespace {

// Every SYMMOE_* knob (include/symmoe/env.hpp) with its meaning, and the value of those that are set.
void print_knobs() {
  std::printf("environment knobs (SYMMOE_*; set ones marked *):\n");
  for (const symmoe::env::Knob& k : symmoe::env::known_knobs()) {
    const char* v = symmoe::env::raw(k.name);
    std::printf(" %s SYMMOE_%-17s %s%s\n", v ? "*" : " ", k.name, k.meaning,
                v ? (std::string(" = '") + v + "'").c_str() : "");
  }
}

int run_info(int argc, char** argv) {
  symmoe::cli::Args args("info", "Print the GPUs symmoe can use: SMs, memory, compute capability and peer access.");
  if (!args.parse(argc, argv)) return 0;
  int runtime_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  int num_gpus = 0;
  const cudaError_t err = cudaGetDeviceCount(&num_gpus);
  std::printf("symmoe info\n  CUDA runtime %d.%d (static)\n", runtime_version / 1000, (runtime_version % 1000) / 10);
  if (err != cudaSuccess || num_gpus == 0) {
    std::printf("  no GPU (%s): the CLI runs the golden model on the CPU\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    cudaGetLastError();  // clear the sticky-free "no device" error
    print_knobs();
    return 0;
  }
  int driver_version = 0;
  cudaDriverGetVersion(&driver_version);
  std::printf("  driver supports CUDA %d.%d, %d GPU(s)\n", driver_version / 1000, (driver_version % 1000) / 10, num_gpus);
  for (int d = 0; d < num_gpus; ++d) {
    cudaDeviceProp prop{};
    SYMMOE_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    std::printf("  GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB, smem/block opt-in %zu KiB%s\n", d, prop.name,
                prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0,
                prop.l2CacheSize >> 20, prop.sharedMemPerBlockOptin >> 10,
                prop.major == 9 ? "" : "  (not Hopper: symmoe kernels need sm_90a)");
    for (int p = 0; p < num_gpus; ++p) {
      if (p == d) continue;
      int can = 0, perf = 0;
      SYMMOE_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, d, p));
      cudaDeviceGetP2PAttribute(&perf, cudaDevP2PAttrPerformanceRank, d, p);
      std::printf("    peer %d: %s (performance rank %d)\n", p, can ? "peer access" : "no peer access", perf);
    }
  }
  print_knobs();
  return 0;
}

}  // namespace

SYMMOE_CLI_COMMAND(info, "info", "GPUs, SMs, memory and peer (NVLink) access, or 'no GPU'", run_info);
