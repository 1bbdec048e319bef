#include "cli/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace symmoe::cli {

bool StageProgress::on_terminal() { return isatty(STDERR_FILENO) == 1; }

StageProgress::StageProgress(std::string stage) : stage_(std::move(stage)) {
  if (!on_terminal()) return;
  painter_ = std::thread([this] {
    const auto start = std::chrono::steady_clock::now();
    bool printed = false;
    std::unique_lock<std::mutex> lock(mutex_);
    // Stages shorter than a second print nothing.
    while (!wake_.wait_for(lock, std::chrono::milliseconds(500), [this] { return done_; })) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (s < 1.0) continue;
      std::fprintf(stderr, "\r  %s ... %.0f s ", stage_.c_str(), s);
      std::fflush(stderr);
      printed = true;
    }
    if (!printed) return;
    std::fprintf(stderr, "\r\033[K");  // erase the line: the stage's result is printed by its caller
    std::fflush(stderr);
  });
}

StageProgress::~StageProgress() {
  if (!painter_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_one();
  painter_.join();
}

}  // namespace symmoe::cli
