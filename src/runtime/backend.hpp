// Internal: what a runtime backend provides to Communicator (in_process.cpp, multi_process.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "symmoe/runtime.hpp"

namespace symmoe::runtime_detail {

// One local rank's view of a symmetric allocation.
struct LocalAllocation {
  void* base = nullptr;
  std::vector<int64_t> offsets;  // offsets[peer] = base(peer) - base, in this process
  std::vector<void*> mapped;     // peers' bases mapped into this process (IPC), to unmap
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual symmoe::Backend kind() const = 0;
  virtual int num_ranks() const = 0;
  virtual const std::vector<RankPlacement>& local_ranks() const = 0;
  // Allocates num_bytes (zeroed) on every local rank and maps every peer's; one entry per local rank.
  virtual std::vector<LocalAllocation> allocate(size_t num_bytes) = 0;
  virtual void release(std::vector<LocalAllocation>& allocations) = 0;  // collective
  virtual void host_barrier() = 0;
};

std::unique_ptr<Backend> make_in_process_backend(int num_ranks);
std::unique_ptr<Backend> make_multi_process_backend(const BootstrapConfig& cfg);

// RAII: switch the current device, restore on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();

 private:
  int previous_ = 0;
};

}  // namespace symmoe::runtime_detail
