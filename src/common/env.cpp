// Environment knobs: the one list (kKnobs) and the strict readers of include/symmoe/env.hpp.
#include "symmoe/env.hpp"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "common/spelling.hpp"
#include "symmoe/common.hpp"

extern char** environ;

namespace symmoe::env {
namespace {

// Keep in sync with their readers (grep SYMMOE_ over the tree); an unlisted name read by raw() is an internal error.
const std::vector<Knob> kKnobs = {
    // name, meaning, integer, lo, hi, scripts only
    {"TIMEOUT_MS", "bound on every cross-rank wait before it reports the stalled peer, ms (default 10000)", true, 1,
     24ll * 3600 * 1000, false},
    {"BLOCK_M", "planner: force BLOCK_M (tokens per tile) of MegaMoE / grouped GEMM (0: planner's choice)", true, 0,
     256, false},
    {"NUM_STAGES", "planner: force the pipeline stages (must fit shared memory; 0: planner's choice)", true, 0, 64,
     false},
    {"EP_SMS", "planner: force the SMs of EP dispatch and combine (0: planner's choice)", true, 0, 1024, false},
    {"EXPERTS_PER_WAVE", "planner: force MegaMoE experts per wave (must divide E / R; 0: planner's choice)", true, 0,
     1 << 16, false},
    {"UNIQUE_ID", "multi-process bootstrap: NCCL unique id as 256 hex digits", false, 0, 0, false},
    {"BOOTSTRAP_DIR", "multi-process bootstrap: directory where rank 0 publishes the id (`symmoe launch` sets it)",
     false, 0, 0, false},
    {"GPU_KIND", "device kind recorded in benchmark results (e.g. nvidia-h200-x2)", false, 0, 0, false},
    {"COMMIT", "commit recorded in benchmark results (tools/pack-device.sh writes it)", false, 0, 0, false},
    {"LOG_LEVEL", "verbosity of symmoe's log lines on stderr", false, 0, 0, false},
    {"TEST_SEED", "GPU tests: the session seed of every random input (printed; a failed test prints its rerun)", false,
     0, 0, true},
    {"TESTS", "tools/device-check.sh: run only these gpu_test_* binaries (e.g. \"runtime gemm\")", false, 0, 0, true},
    {"RUN_ARGS", "tools/device-check.sh: arguments of its `symmoe run`", false, 0, 0, true},
    {"CHECK_TIMEOUT", "tools/device-check.sh: bound on each command, seconds (default 300)", false, 0, 0, true},
    {"PY_STEPS", "python/tests_gpu/run_device.sh: run only these steps", false, 0, 0, true},
    {"BUILD_TIMEOUT", "python/tests_gpu/run_device.sh: bound on the build, seconds (default 300)", false, 0, 0, true},
    {"STEP_TIMEOUT", "python/tests_gpu/run_device.sh: bound on each other step, seconds (default 150)", false, 0, 0,
     true},
    {"DEADLINE", "python/tests_gpu/run_device.sh: no step starts after this many seconds (default none)", false, 0, 0,
     true},
    {"SKIP_BUILD", "python/tests_gpu/run_{torch_ext,deepep_test}.sh: 1 reuses the installed symmoe", false, 0, 0, true},
    {"SANITIZE_BUDGET", "tools/device-check.sh --sanitize: bound on the whole mode, seconds (default 540)", false, 0, 0,
     true},
    {"DEEPEP_ARGS", "python/tests_gpu/run_deepep_test.sh: extra arguments of every DeepEP test run", false, 0, 0, true},
    {"DEEPEP_PORT", "python/tests_gpu/run_deepep_test.sh: base of the MASTER_PORTs (default 29611)", false, 0, 0, true},
    {"TORCH_EXT_BUILD", "python/tests_gpu/build_torch_ext.sh: build directory (default a fresh temporary one)", false,
     0, 0, true},
    {"TORCH_EXT_TIMEOUT", "python/tests_gpu/build_torch_ext.sh: bound on the compile, seconds (default 300)", false, 0,
     0, true},
};

const Knob* find_knob(const std::string& name) {
  for (const Knob& k : kKnobs)
    if (name == k.name) return &k;
  return nullptr;
}

const Knob& knob(const std::string& name) {
  const Knob* k = find_knob(name);
  SYMMOE_CHECK(k != nullptr, "env", "internal: SYMMOE_", name, " is read but not listed in src/common/env.cpp");
  return *k;
}

}  // namespace

const std::vector<Knob>& known_knobs() { return kKnobs; }

const char* raw(const std::string& name) {
  knob(name);
  warn_unknown_names();
  return std::getenv(("SYMMOE_" + name).c_str());
}

std::string get_string(const std::string& name, const std::string& def) {
  const char* v = raw(name);
  return v && *v ? std::string(v) : def;
}

long long get_int(const std::string& name, long long def) {
  const Knob& k = knob(name);
  SYMMOE_CHECK(k.is_integer, "env", "internal: SYMMOE_", name, " is not an integer knob");
  const char* v = raw(name);
  if (!v || !*v) return def;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  const bool whole = errno == 0 && end && *end == '\0' && !std::isspace(static_cast<unsigned char>(v[0]));
  SYMMOE_CHECK(whole && x >= k.lo && x <= k.hi, "env", "SYMMOE_", name, " must be an integer in [", k.lo, ", ", k.hi,
               "], got '", v, "' (", k.meaning, ")");
  return x;
}

std::vector<std::string> unknown_name_warnings(const std::vector<std::string>& variables) {
  std::vector<std::string> names;
  for (const Knob& k : kKnobs) names.push_back(k.name);
  std::vector<std::string> out;
  for (const std::string& v : variables) {
    if (v.rfind("SYMMOE_", 0) != 0 || find_knob(v.substr(7))) continue;
    const std::string hint = detail::closest_word(v.substr(7), names);
    out.push_back(detail::concat("symmoe: warning: unknown environment variable ", v, " is ignored",
                                 hint.empty() ? std::string(" (symmoe info lists the known SYMMOE_ knobs)")
                                              : " (did you mean SYMMOE_" + hint + "?)"));
  }
  return out;
}

void warn_unknown_names() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> variables;
    for (char** e = environ; e && *e; ++e) {
      const std::string entry = *e;
      variables.push_back(entry.substr(0, entry.find('=')));
    }
    for (const std::string& line : unknown_name_warnings(variables)) std::fprintf(stderr, "%s\n", line.c_str());
  });
}

}  // namespace symmoe::env
