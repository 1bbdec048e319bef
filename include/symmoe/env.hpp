// The one place that reads environment overrides. Every knob is SYMMOE_<NAME>; callers pass NAME only, and every
// NAME is listed, with its meaning and the values it accepts, in src/common/env.cpp (kKnobs): `symmoe info` prints
// the list. Reads are strict: a value that is not a whole decimal integer in the knob's range is a symmoe::Error
// naming the variable, expected and got (SYMMOE_BLOCK_M=4294967312 is an error, never 16). A set SYMMOE_* variable
// that is not a known knob (a misspelling) gets one warning per process on stderr with the closest known name.
// NOTES: a knob is read once by what it configures and kept there, never on a layer's per-call path:
//   TIMEOUT_MS                            when a Communicator is created (Communicator::in_process / from_env)
//   BLOCK_M, NUM_STAGES, EP_SMS,          as one plan::PlanOverrides snapshot (PlanOverrides::from_env) when a
//   EXPERTS_PER_WAVE                      MegaMoe or EpBuffer is constructed, or by the caller of a planner function
//                                         (the planner itself never reads the environment); the grouped GEMM entry
//                                         points (src/gemm/grouped_gemm.cpp) take one snapshot per process, at
//                                         their first call
//   UNIQUE_ID, BOOTSTRAP_DIR              when a multi-process Communicator bootstraps
//   LOG_LEVEL                             at the first log line
//   GPU_KIND, COMMIT                      by the benches, per result line
// So a knob set after an object exists (or after the first grouped GEMM call) does not change it: construct a new
// one. The names are checked once, at the first read (and at the start of the CLI and of the Python module).
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace symmoe::env {

struct Knob {
  const char* name;     // without the SYMMOE_ prefix
  const char* meaning;  // one line, for `symmoe info` and warnings
  bool is_integer;      // read with get_int: a whole decimal integer in [lo, hi]
  long long lo, hi;
  bool read_by_scripts;  // read by tools/*.sh or python/tests_gpu/*.sh only, never by the library
};

// Every known knob, in one list.
const std::vector<Knob>& known_knobs();

// SYMMOE_<name> as set, or nullptr. `name` must be a known knob (an unknown one is an internal error).
const char* raw(const std::string& name);

// SYMMOE_<name>, or `def` when unset or empty.
std::string get_string(const std::string& name, const std::string& def);

// Integer knob: `def` when unset or empty; otherwise the whole value must be a decimal integer in the knob's range
// (symmoe::Error naming SYMMOE_<name>, the range and the value otherwise).
long long get_int(const std::string& name, long long def);

// Warns (once per process, on stderr) about every set SYMMOE_* variable that is not a known knob. Called by raw()
// and at the start of the CLI.
void warn_unknown_names();

// The warning lines for `variables` (full names, e.g. "SYMMOE_BLOKC_M"): one per SYMMOE_* name that is not a
// known knob, naming the closest known one. Empty when all are known.
std::vector<std::string> unknown_name_warnings(const std::vector<std::string>& variables);

}  // namespace symmoe::env
