// Benchmark plumbing: `symmoe bench <name>` looks up benches registered here (one file per bench under bench/),
// times with CUDA events (warm-up, many repetitions, median) and appends JSON lines to
// bench/results/<date>-<gpu kind>-<bench>.jsonl (docs/design.md §10.3).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "cli_common/command.hpp"
#include "cli_common/timing.hpp"
#include "result_line.hpp"

namespace symmoe::bench {

struct Bench {
  std::string name, summary;
  std::function<int(int argc, char** argv)> run;  // argv[0] is the bench name
};
std::map<std::string, Bench>& registry();
struct BenchRegistrar {
  BenchRegistrar(const std::string& name, const std::string& summary, std::function<int(int, char**)> fn) {
    registry()[name] = Bench{name, summary, std::move(fn)};
  }
};

// Called by every bench right after parsing its flags (so bad flags are reported on any machine): false, with
// "bench needs a Hopper GPU (sm_90): <why>" on stderr, when no usable GPU is visible; else records the run
// environment (run_environment.hpp) before the first kernel and returns true.
bool require_hopper_gpu();

// The timers every bench uses (cli_common/timing.hpp, shared with `symmoe run`).
using cli::graph_time_all_ranks_us;
using cli::median_time_us;

// Common fields: date (UTC, YYYY-MM-DD), gpu (result_line.hpp's gpu_kind: SYMMOE_GPU_KIND or the GPUs' names),
// command (the full command line), bench, and the run environment (run_environment.hpp: version, commit, driver, CUDA,
// NCCL, SM clocks, power).
JsonLine common_fields(const std::string& bench_name, int argc, char** argv);

// Appends `line` to <dir>/<date>-<gpu kind>-<bench>.jsonl (dir from --out, default bench/results) and echoes it.
void append_result(const std::string& dir, const std::string& bench_name, const JsonLine& line);

}  // namespace symmoe::bench

#define SYMMOE_BENCH(ident, name, summary, fn) \
  static ::symmoe::bench::BenchRegistrar symmoe_bench_registrar_##ident(name, summary, fn)
