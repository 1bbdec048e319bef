// Multi-process bootstrap arguments: RANK / WORLD_SIZE / LOCAL_RANK plus how the NCCL unique id travels
// (SYMMOE_UNIQUE_ID as hex, or a file that rank 0 writes into SYMMOE_BOOTSTRAP_DIR). Checked before any NCCL call.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "symmoe/env.hpp"
#include "symmoe/runtime.hpp"

namespace symmoe {

namespace {

const char* default_lookup(const char* name) {
  const std::string n(name);
  if (n.rfind("SYMMOE_", 0) == 0) return env::raw(n.substr(7));  // SYMMOE_ knobs only through env.hpp
  return std::getenv(name);  // the launcher convention shared with torchrun / MPI wrappers
}

int read_int(const EnvLookup& lookup, const char* name) {
  const char* v = lookup(name);
  SYMMOE_CHECK(v && *v, "runtime", "multi-process bootstrap: environment variable ", name,
               " is not set (RANK, WORLD_SIZE and LOCAL_RANK are required; `symmoe launch` sets them)");
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  SYMMOE_CHECK(end && *end == '\0' && errno == 0, "runtime", "multi-process bootstrap: ", name,
               " must be an integer, got '", v, "'");
  return int(x);
}

}  // namespace

bool multi_process_env_present(const EnvLookup& lookup) {
  const EnvLookup& get = lookup ? lookup : EnvLookup(default_lookup);
  const char* v = get("WORLD_SIZE");
  return v && *v;
}

BootstrapConfig bootstrap_config_from_env(const EnvLookup& lookup) {
  const EnvLookup get = lookup ? lookup : EnvLookup(default_lookup);
  BootstrapConfig cfg;
  cfg.world_size = read_int(get, "WORLD_SIZE");
  SYMMOE_CHECK(cfg.world_size >= 1 && cfg.world_size <= int(layout::kMaxRanks), "runtime",
               "multi-process bootstrap: WORLD_SIZE must be in [1, ", layout::kMaxRanks, "], got ", cfg.world_size);
  cfg.rank = read_int(get, "RANK");
  SYMMOE_CHECK(cfg.rank >= 0 && cfg.rank < cfg.world_size, "runtime", "multi-process bootstrap: RANK must be in [0, ",
               cfg.world_size, ") for WORLD_SIZE ", cfg.world_size, ", got ", cfg.rank);
  cfg.local_rank = read_int(get, "LOCAL_RANK");
  SYMMOE_CHECK(cfg.local_rank >= 0 && cfg.local_rank < cfg.world_size, "runtime",
               "multi-process bootstrap: LOCAL_RANK must be in [0, ", cfg.world_size, "), got ", cfg.local_rank);
  if (const char* id = get("SYMMOE_UNIQUE_ID"); id && *id) cfg.unique_id_hex = id;
  if (const char* dir = get("SYMMOE_BOOTSTRAP_DIR"); dir && *dir) cfg.bootstrap_dir = dir;
  SYMMOE_CHECK(!cfg.unique_id_hex.empty() || !cfg.bootstrap_dir.empty(), "runtime",
               "multi-process bootstrap: neither SYMMOE_UNIQUE_ID nor SYMMOE_BOOTSTRAP_DIR is set (rank ", cfg.rank,
               "); run under `symmoe launch -n N -- ...` or set one of them");
  if (!cfg.unique_id_hex.empty()) {
    SYMMOE_CHECK(cfg.unique_id_hex.size() == 256 &&
                     cfg.unique_id_hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos,
                 "runtime", "SYMMOE_UNIQUE_ID must be 256 hex digits (an NCCL unique id), got ",
                 cfg.unique_id_hex.size(), " characters");
  }
  return cfg;
}

void claim_rank(const std::string& dir, int generation, int rank, int world_size) {
  const std::string path = dir + "/rank." + std::to_string(generation) + "." + std::to_string(rank);
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0 && errno == EEXIST)
    SYMMOE_FAIL("runtime", "multi-process bootstrap: RANK ", rank, " of WORLD_SIZE ", world_size,
                " is claimed by two processes (duplicate rank; ", path, " exists)");
  SYMMOE_CHECK(fd >= 0, "runtime", "multi-process bootstrap: cannot create ", path, ": ", std::strerror(errno));
  const std::string pid = std::to_string(::getpid()) + "\n";
  [[maybe_unused]] const auto n = ::write(fd, pid.data(), pid.size());
  ::close(fd);
}

}  // namespace symmoe
