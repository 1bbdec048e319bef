#include "bench.hpp"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "cli_common/gpu_probe.hpp"
#include "run_environment.hpp"
#include "symmoe/cuda_check.hpp"

namespace symmoe::bench {

std::map<std::string, Bench>& registry() {
  static std::map<std::string, Bench> benches;
  return benches;
}

static std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

JsonLine common_fields(const std::string& bench_name, int argc, char** argv) {
  std::string command = "symmoe bench";
  for (int i = 0; i < argc; ++i) command += std::string(" ") + argv[i];
  JsonLine line;
  line.add("date", utc_date()).add("gpu", run_environment().gpu).add("command", command).add("bench", bench_name);
  add_run_environment(line);
  return line;
}

void append_result(const std::string& dir, const std::string& bench_name, const JsonLine& line) {
  const std::string path = dir + "/" + utc_date() + "-" + run_environment().gpu + "-" + bench_name + ".jsonl";
  std::filesystem::create_directories(dir);  // a fresh $OUT/results on the GPU machine
  std::ofstream out(path, std::ios::app);
  SYMMOE_CHECK(out.good(), "bench", "cannot open result file ", path);
  out << line.str() << "\n";
  std::printf("%s\n", line.str().c_str());
}

bool require_hopper_gpu() {
  const std::string problem = cli::hopper_problem(cli::probe_gpus());
  if (!problem.empty()) {
    std::fprintf(stderr, "symmoe bench: bench needs a Hopper GPU (sm_90): %s\n", problem.c_str());
    return false;
  }
  run_environment();  // driver, clocks and power before the first kernel
  return true;
}

}  // namespace symmoe::bench

namespace {
int run_bench(int argc, char** argv) {
  auto& reg = symmoe::bench::registry();
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::printf("usage: symmoe bench <name> [options]   (symmoe bench <name> --help)\n\nbenches:\n");
    for (const auto& [name, b] : reg) std::printf("  %-8s %s\n", name.c_str(), b.summary.c_str());
    return argc < 2 ? 2 : 0;
  }
  const auto it = reg.find(argv[1]);
  SYMMOE_CHECK(it != reg.end(), "bench", "unknown bench '", argv[1], "' (symmoe bench --help lists them)");
  return it->second.run(argc - 1, argv + 1);  // the bench parses its flags, then calls require_hopper_gpu()
}
}  // namespace

SYMMOE_CLI_COMMAND(bench, "bench", "benchmarks on the GPUs (p2p, ep, gemm, moe, stream); results as JSON lines",
                   run_bench);
