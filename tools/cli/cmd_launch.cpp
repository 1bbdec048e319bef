// `symmoe launch -n N [--timeout S] -- command args...`: runs N processes of a multi-process job on this node
// (RANK / WORLD_SIZE / LOCAL_RANK / SYMMOE_BOOTSTRAP_DIR set), e.g. `symmoe launch -n 2 -- symmoe bench p2p`.
#include <cstring>

#include "cli_common/command.hpp"
#include "cli_common/limits.hpp"
#include "runtime/launcher.hpp"

namespace {

int run_launch(int argc, char** argv) {
  symmoe::cli::Args args("launch",
                         "Start N processes of a multi-process job (one per GPU), wait for all, stop the others when "
                         "one fails.\nusage: symmoe launch -n N [--timeout S] -- command args...");
  args.option("n", "", "number of processes (ranks); also accepted as -n")
      .int_range(1, symmoe::cli::kMaxRanks)
      .option("timeout", "0", "seconds before all processes are stopped (0: no limit); exit code 124")
      .real_range(0, 1e9)
      .option("grace", "5", "seconds between SIGTERM and SIGKILL when stopping processes")
      .real_range(0, 3600)
      .positionals("-- command args...");
  // "-n N" is the conventional spelling; the flag parser knows only --name.
  std::vector<char*> rewritten(argv, argv + argc);
  static char long_n[] = "--n";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--")) break;
    if (!std::strcmp(argv[i], "-n")) rewritten[i] = long_n;
  }
  if (!args.parse(argc, rewritten.data())) return 0;
  symmoe::runtime::LaunchOptions options;
  options.num_processes = args.str("n").empty() ? 0 : args.integer("n");
  options.timeout_s = args.real("timeout");
  options.grace_s = args.real("grace");
  options.command = args.positional();
  return symmoe::runtime::launch_processes(options);
}

}  // namespace

SYMMOE_CLI_COMMAND(launch, "launch", "start N processes (RANK/WORLD_SIZE/LOCAL_RANK) of a multi-process job",
                   run_launch);
