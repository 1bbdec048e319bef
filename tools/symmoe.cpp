// symmoe CLI entry: dispatches to the subcommands registered under tools/cli/ (one file each).
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli_common/command.hpp"
#include "symmoe/common.hpp"
#include "symmoe/env.hpp"
#include "symmoe/version.hpp"

namespace {
void print_usage() {
  std::printf(
      "symmoe - expert-parallel MoE on Hopper (dispatch/combine over NVLink, fused MoE layer)\n\n"
      "usage: symmoe <command> [options]     (symmoe <command> --help for its flags)\n"
      "       symmoe --version\n\ncommands:\n");
  for (const auto& [name, cmd] : symmoe::cli::registry())
    std::printf("  %-10s %s\n", name.c_str(), cmd.summary.c_str());
}
}  // namespace

int main(int argc, char** argv) {
  symmoe::env::warn_unknown_names();  // misspelt SYMMOE_* knobs, before any output
  if (argc >= 2 && (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version"))) {
    std::printf("symmoe %s (commit %s, %s)\n", symmoe::kVersion, symmoe::kGitCommit,
                symmoe::kWithCuda ? "CUDA, sm_90a" : "CPU-only build");
    return 0;
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  const auto& reg = symmoe::cli::registry();
  const auto it = reg.find(argv[1]);
  if (it == reg.end()) {
    std::fprintf(stderr, "symmoe: unknown command '%s'\n\n", argv[1]);
    print_usage();
    return 2;
  }
  try {
    return it->second.run(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
