// In-process backend: R virtual ranks in one process, round-robin over the visible GPUs. Each rank has its own
// cudaMalloc'd allocation; peer access is enabled between every pair of GPUs, so with UVA a peer's allocation is
// addressable from any rank and offsets[peer] = base_peer - base_self (same GPU or not).
#include <algorithm>
#include <mutex>
#include <set>
#include <utility>

#include "runtime/backend.hpp"
#include "symmoe/cuda_check.hpp"

namespace symmoe::runtime_detail {

DeviceGuard::DeviceGuard(int device) {
  SYMMOE_CUDA_CHECK(cudaGetDevice(&previous_));
  SYMMOE_CUDA_CHECK(cudaSetDevice(device));
}
DeviceGuard::~DeviceGuard() { cudaSetDevice(previous_); }

namespace {

// Peer access is per process and cannot be queried: remember what we enabled, so a second communicator does not
// provoke (and have to swallow) cudaErrorPeerAccessAlreadyEnabled.
void enable_peer_access_once(int device, int peer) {
  static std::mutex mutex;
  static std::set<std::pair<int, int>> enabled;
  std::lock_guard<std::mutex> lock(mutex);
  if (!enabled.insert({device, peer}).second) return;
  DeviceGuard guard(device);
  const cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // enabled by someone else in this process: fine, and not sticky
  } else {
    SYMMOE_CUDA_CHECK(err);
  }
}

class InProcessBackend final : public Backend {
 public:
  explicit InProcessBackend(int num_ranks) {
    int num_devices = 0;
    SYMMOE_CUDA_CHECK(cudaGetDeviceCount(&num_devices));
    SYMMOE_CHECK(num_devices >= 1, "runtime", "in-process backend: no GPU visible");
    num_devices = std::min(num_devices, num_ranks);  // never more devices than ranks
    int sms = 0;
    for (int d = 0; d < num_devices; ++d) {
      int s = 0;
      SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&s, cudaDevAttrMultiProcessorCount, d));
      sms = d == 0 ? s : std::min(sms, s);
    }
    placement_ = place_ranks_in_process(num_ranks, num_devices, sms);
    for (int d = 0; d < num_devices; ++d) {
      for (int p = 0; p < num_devices; ++p) {
        if (p == d) continue;
        int can = 0;
        SYMMOE_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, d, p));
        SYMMOE_CHECK(can, "runtime", "in-process backend: GPU ", d, " cannot access GPU ", p,
                     " (no peer access; symmetric memory needs NVLink or PCIe P2P)");
        enable_peer_access_once(d, p);
      }
    }
  }

  symmoe::Backend kind() const override { return symmoe::Backend::kInProcess; }
  int num_ranks() const override { return int(placement_.size()); }
  const std::vector<RankPlacement>& local_ranks() const override { return placement_; }

  std::vector<LocalAllocation> allocate(size_t num_bytes) override {
    std::vector<LocalAllocation> out(placement_.size());
    try {
      for (const auto& p : placement_) {
        DeviceGuard guard(p.device);
        SYMMOE_CUDA_CHECK(cudaMalloc(&out[p.rank].base, num_bytes));
        SYMMOE_CUDA_CHECK(cudaMemset(out[p.rank].base, 0, num_bytes));
      }
    } catch (...) {
      release(out);
      throw;
    }
    for (auto& a : out) {
      a.offsets.resize(out.size());
      for (size_t peer = 0; peer < out.size(); ++peer)
        a.offsets[peer] = reinterpret_cast<int64_t>(out[peer].base) - reinterpret_cast<int64_t>(a.base);
    }
    for (const auto& p : placement_) {  // the memsets ran on the legacy stream of each device
      DeviceGuard guard(p.device);
      SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
    }
    return out;
  }

  void release(std::vector<LocalAllocation>& allocations) override {
    for (size_t i = 0; i < allocations.size(); ++i) {
      if (!allocations[i].base) continue;
      DeviceGuard guard(placement_[i].device);
      cudaFree(allocations[i].base);  // frees synchronise with the device
      allocations[i].base = nullptr;
    }
  }

  void host_barrier() override {}  // one process: nothing to wait for

 private:
  std::vector<RankPlacement> placement_;
};

}  // namespace

std::unique_ptr<Backend> make_in_process_backend(int num_ranks) {
  return std::make_unique<InProcessBackend>(num_ranks);
}

}  // namespace symmoe::runtime_detail
