#include "runtime/launcher.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "symmoe/common.hpp"
#include "symmoe/layout/sync.hpp"

namespace symmoe::runtime {

namespace {

using Clock = std::chrono::steady_clock;

std::string self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("symmoe") : p.string();
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Stops every still-running child we started: SIGTERM, then SIGKILL after the grace period.
void stop_children(std::vector<pid_t>& pids, double grace_s) {
  for (pid_t pid : pids)
    if (pid > 0) ::kill(pid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::duration<double>(grace_s);
  for (;;) {
    bool any = false;
    for (pid_t& pid : pids) {
      if (pid <= 0) continue;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid)
        pid = -1;
      else
        any = true;
    }
    if (!any) return;
    if (Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t& pid : pids) {
    if (pid <= 0) continue;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
}

}  // namespace

int launch_processes(const LaunchOptions& options) {
  const int n = options.num_processes;
  SYMMOE_CHECK(n >= 1 && n <= int(layout::kMaxRanks), "launch", "-n must be in [1, ", layout::kMaxRanks, "], got ", n);
  SYMMOE_CHECK(!options.command.empty(), "launch", "no command given (usage: symmoe launch -n N -- command args...)");
  SYMMOE_CHECK(options.timeout_s >= 0, "launch", "--timeout must be >= 0, got ", options.timeout_s);

  char dir_template[] = "/tmp/symmoe-launch-XXXXXX";
  SYMMOE_CHECK(::mkdtemp(dir_template) != nullptr, "launch",
               "cannot create a bootstrap directory: ", std::strerror(errno));
  const std::string bootstrap_dir = dir_template;

  std::vector<std::string> argv_storage = options.command;
  if (argv_storage[0] == "symmoe") argv_storage[0] = self_executable();
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(n, -1);
  for (int rank = 0; rank < n; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      stop_children(pids, options.grace_s);
      SYMMOE_FAIL("launch", "fork for rank ", rank, " failed: ", std::strerror(errno));
    }
    if (pid == 0) {                        // child
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("SYMMOE_BOOTSTRAP_DIR", bootstrap_dir.c_str(), 1);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "[launch] rank %d: cannot run '%s': %s\n", rank, argv[0], std::strerror(errno));
      std::_Exit(127);
    }
    pids[rank] = pid;
  }

  const auto start = Clock::now();
  int result = 0, remaining = n;
  while (remaining > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int rank = -1;
      for (int r = 0; r < n; ++r)
        if (pids[r] == pid) rank = r;
      if (rank < 0) continue;  // not ours
      pids[rank] = -1;
      --remaining;
      const int code = exit_code_of(status);
      if (code != 0) {
        std::fprintf(stderr, "[launch] rank %d exited with code %d; stopping the other %d process(es)\n", rank, code,
                     remaining);
        stop_children(pids, options.grace_s);
        result = code;
        break;
      }
      continue;
    }
    if (options.timeout_s > 0 && std::chrono::duration<double>(Clock::now() - start).count() > options.timeout_s) {
      std::fprintf(stderr, "[launch] timeout after %.1f s; stopping %d process(es)\n", options.timeout_s, remaining);
      stop_children(pids, options.grace_s);
      result = 124;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::error_code ec;
  std::filesystem::remove_all(bootstrap_dir, ec);
  return result;
}

}  // namespace symmoe::runtime
