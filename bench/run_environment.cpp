#include "run_environment.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>

#include "cli_common/gpu_probe.hpp"
#include "symmoe/env.hpp"
#include "symmoe/version.hpp"

namespace symmoe::bench {

namespace {

using PciId = std::tuple<unsigned, unsigned, unsigned, unsigned>;  // domain, bus, device, function

std::optional<PciId> parse_pci(const std::string& s) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(s.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) return std::nullopt;
  return PciId{domain, bus, device, function};
}

std::optional<double> parse_number(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;  // "[N/A]", "[Not Supported]"
  return v;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

struct SmiRow {
  std::string driver;
  std::optional<double> sm_clock_mhz, power_w;
};

// nvidia-smi's view of every GPU (all of them: it ignores CUDA_VISIBLE_DEVICES), keyed by PCI id.
std::map<PciId, SmiRow> query_nvidia_smi() {
  std::map<PciId, SmiRow> rows;
  FILE* pipe = popen(
      "nvidia-smi --query-gpu=pci.bus_id,driver_version,clocks.sm,power.draw "
      "--format=csv,noheader,nounits 2>/dev/null",
      "r");
  if (!pipe) return rows;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) {
    std::vector<std::string> cols;
    std::string cur;
    for (const char* c = buf; *c; ++c) {
      if (*c == ',')
        cols.push_back(trim(cur)), cur.clear();
      else
        cur += *c;
    }
    cols.push_back(trim(cur));
    if (cols.size() != 4) continue;
    const auto pci = parse_pci(cols[0]);
    if (!pci) continue;
    rows[*pci] = SmiRow{cols[1], parse_number(cols[2]), parse_number(cols[3])};
  }
  pclose(pipe);
  return rows;
}

RunEnvironment collect() {
  RunEnvironment env;
  env.version = kVersion;
  // The build's own commit; SYMMOE_COMMIT (set by tools/device-check.sh from the packed COMMIT file) only where the
  // binary was built outside a git checkout.
  env.commit = kGitCommit;
  if (env.commit == "unknown") env.commit = symmoe::env::get_string("COMMIT", "unknown");

  const cli::GpuProbe probe = cli::probe_gpus();
  env.cuda = cli::cuda_version_string(probe.runtime_version);
  if (probe.driver_version > 0) env.cuda_driver = cli::cuda_version_string(probe.driver_version);
  int nccl_code = 0;
  if (ncclGetVersion(&nccl_code) == ncclSuccess && nccl_code > 0)
    env.nccl = std::to_string(nccl_code / 10000) + "." + std::to_string(nccl_code % 10000 / 100) + "." +
               std::to_string(nccl_code % 100);

  std::vector<std::string> names;
  for (int d = 0; d < probe.num_gpus; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess)
      names.push_back(prop.name);
    else
      cudaGetLastError();
  }
  env.gpu = gpu_kind(symmoe::env::get_string("GPU_KIND", ""), names);

  const auto smi = query_nvidia_smi();
  if (!smi.empty()) env.driver = smi.begin()->second.driver;
  for (int d = 0; d < probe.num_gpus; ++d) {
    char bus_id[64] = {};
    std::optional<double> clock, power;
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, d) == cudaSuccess) {
      const auto pci = parse_pci(bus_id);
      const auto it = pci ? smi.find(*pci) : smi.end();
      if (it != smi.end()) clock = it->second.sm_clock_mhz, power = it->second.power_w;
    } else {
      cudaGetLastError();
    }
    env.sm_clock_mhz.push_back(clock);
    env.power_w.push_back(power);
  }
  return env;
}

}  // namespace

const RunEnvironment& run_environment() {
  static const RunEnvironment env = collect();
  return env;
}

void add_run_environment(JsonLine& line) {
  const RunEnvironment& env = run_environment();
  line.add("version", env.version)
      .add("commit", env.commit)
      .add("driver", env.driver)
      .add("cuda_driver", env.cuda_driver)
      .add("cuda", env.cuda)
      .add("nccl", env.nccl)
      .add("sm_clock_mhz", env.sm_clock_mhz)
      .add("power_w", env.power_w);
}

}  // namespace symmoe::bench
