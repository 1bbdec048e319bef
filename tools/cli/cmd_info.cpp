// `symmoe info`: what this machine offers symmoe: GPUs, SMs, memory, peer (NVLink) access, or one plain sentence
// saying why there is no GPU ("no NVIDIA driver", "no GPU visible", a CPU-only build). Exits 0 either way: having
// no GPU is an answer, not an error.
#include <cstdio>
#include <string>

#include "cli_common/command.hpp"
#include "cli_common/gpu_probe.hpp"
#include "symmoe/version.hpp"

#if SYMMOE_WITH_CUDA
#include <cuda_runtime.h>

#include "symmoe/cuda_check.hpp"
#endif
#include "symmoe/env.hpp"

namespace {

using symmoe::cli::cuda_version_string;

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
  const symmoe::cli::GpuProbe probe = symmoe::cli::probe_gpus();
  std::printf("symmoe %s (commit %s)\n", symmoe::kVersion, symmoe::kGitCommit);
  if (symmoe::kWithCuda)
    std::printf("  CUDA runtime %s (static)\n", cuda_version_string(probe.runtime_version).c_str());
  if (probe.num_gpus == 0) {
    std::printf(
        "  no GPU: %s\n  `symmoe run` runs the golden model on the CPU here; the kernels and `symmoe bench` "
        "need a Hopper GPU\n",
        probe.why_none.c_str());
    print_knobs();
    return 0;
  }
#if SYMMOE_WITH_CUDA
  std::printf("  driver supports CUDA %s, %d GPU(s)\n", cuda_version_string(probe.driver_version).c_str(),
              probe.num_gpus);
  for (int d = 0; d < probe.num_gpus; ++d) {
    cudaDeviceProp prop{};
    SYMMOE_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    std::printf("  GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB, smem/block opt-in %zu KiB%s\n", d, prop.name,
                prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0,
                prop.l2CacheSize >> 20, prop.sharedMemPerBlockOptin >> 10,
                prop.major == 9 ? "" : "  (not Hopper: symmoe kernels need sm_90a)");
    for (int p = 0; p < probe.num_gpus; ++p) {
      if (p == d) continue;
      int can = 0, perf = 0;
      SYMMOE_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, d, p));
      cudaDeviceGetP2PAttribute(&perf, cudaDevP2PAttrPerformanceRank, d, p);
      std::printf("    peer %d: %s (performance rank %d)\n", p, can ? "peer access" : "no peer access", perf);
    }
  }
#endif
  print_knobs();
  return 0;
}

}  // namespace

SYMMOE_CLI_COMMAND(info, "info", "GPUs, SMs, memory and peer (NVLink) access, or why there is no GPU", run_info);
