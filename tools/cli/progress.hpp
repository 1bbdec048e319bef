// A live line for long CPU stages (the golden model over many ranks): "  <stage> ... 12 s", redrawn every half
// second on stderr while the stage runs and erased when it ends. Nothing at all is printed when stderr is not a
// terminal, so logs and CI output stay as they are.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace symmoe::cli {

class StageProgress {
 public:
  explicit StageProgress(std::string stage);
  ~StageProgress();
  StageProgress(const StageProgress&) = delete;
  StageProgress& operator=(const StageProgress&) = delete;

  static bool on_terminal();  // stderr is a terminal

 private:
  std::string stage_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread painter_;  // only on a terminal
};

}  // namespace symmoe::cli
