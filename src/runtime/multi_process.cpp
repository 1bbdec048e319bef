// Multi-process backend: one process per GPU (RANK / WORLD_SIZE / LOCAL_RANK). NCCL's host API bootstraps the
// group (unique id from SYMMOE_UNIQUE_ID or a file rank 0 writes into SYMMOE_BOOTSTRAP_DIR) and all-gathers the
// CUDA IPC handles of each symmetric allocation; each peer's allocation is opened into this process, so
// offsets[peer] = mapped_base(peer) - base(self).
// NOTES: host API only (ncclGetUniqueId, ncclCommInitRank, ncclAllGather, ncclAllReduce): the device machine's
// NCCL runtime (2.28.3) is older than our headers (2.28.9), which the device API would reject.
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/backend.hpp"
#include "runtime/device_block.hpp"
#include "symmoe/cuda_check.hpp"

#define SYMMOE_NCCL_CHECK(call)                                                                           \
  do {                                                                                                    \
    const ncclResult_t symmoe_nccl_ = (call);                                                             \
    if (symmoe_nccl_ != ncclSuccess)                                                                      \
      SYMMOE_FAIL("nccl", #call, " failed on rank ", rank_, ": ", ncclGetErrorString(symmoe_nccl_), " (", \
                  ncclGetLastError(nullptr), ")");                                                        \
  } while (0)

namespace symmoe::runtime_detail {

namespace {

// NOTES: every process creates communicators in the same order, so a per-process counter names the bootstrap
// round (unique-id file, rank claims) consistently across processes.
std::atomic<int> g_generation{0};
constexpr int kBootstrapTimeoutMs = 60000;  // rank 0 may still be starting its CUDA context

std::string to_hex(const ncclUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : id.internal) s += digits[c >> 4], s += digits[c & 15];
  return s;
}

ncclUniqueId from_hex(const std::string& hex) {
  ncclUniqueId id{};
  auto val = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (size_t i = 0; i < sizeof(id.internal); ++i) id.internal[i] = char(val(hex[2 * i]) * 16 + val(hex[2 * i + 1]));
  return id;
}

class MultiProcessBackend final : public Backend {
 public:
  explicit MultiProcessBackend(const BootstrapConfig& cfg) : rank_(cfg.rank), world_(cfg.world_size) {
    const int generation = g_generation++;
    int num_devices = 0;
    SYMMOE_CUDA_CHECK(cudaGetDeviceCount(&num_devices));
    SYMMOE_CHECK(cfg.local_rank < num_devices, "runtime", "rank ", rank_, ": LOCAL_RANK ", cfg.local_rank, " but only ",
                 num_devices, " GPU(s) are visible");
    SYMMOE_CUDA_CHECK(cudaSetDevice(cfg.local_rank));
    int sms = 0;
    SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cfg.local_rank));
    placement_ = {RankPlacement{rank_, cfg.local_rank, 0, 1, sms}};

    ncclUniqueId id{};
    if (!cfg.unique_id_hex.empty()) {
      id = from_hex(cfg.unique_id_hex);
    } else {
      claim_rank(cfg.bootstrap_dir, generation, rank_, world_);
      const std::string path = cfg.bootstrap_dir + "/uid." + std::to_string(generation);
      if (rank_ == 0) {
        SYMMOE_NCCL_CHECK(ncclGetUniqueId(&id));
        const std::string tmp = path + ".tmp";
        std::ofstream(tmp) << to_hex(id) << "\n";
        SYMMOE_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "runtime", "rank 0 cannot publish ", path);
      } else {
        id = wait_for_unique_id(path);
      }
    }
    SYMMOE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    scratch_.allocate(cfg.local_rank, world_ * sizeof(cudaIpcMemHandle_t));
    SYMMOE_NCCL_CHECK(ncclCommInitRank(&comm_, world_, id, rank_));
  }

  ~MultiProcessBackend() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  symmoe::Backend kind() const override { return symmoe::Backend::kMultiProcess; }
  int num_ranks() const override { return world_; }
  const std::vector<RankPlacement>& local_ranks() const override { return placement_; }

  std::vector<LocalAllocation> allocate(size_t num_bytes) override {
    std::vector<LocalAllocation> out(1);
    auto& a = out[0];
    SYMMOE_CUDA_CHECK(cudaMalloc(&a.base, num_bytes));
    SYMMOE_CUDA_CHECK(cudaMemset(a.base, 0, num_bytes));
    SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());  // zeros land before any peer can map the allocation
    cudaIpcMemHandle_t mine{};
    SYMMOE_CUDA_CHECK(cudaIpcGetMemHandle(&mine, a.base));
    std::vector<cudaIpcMemHandle_t> all(world_);
    auto* slots = scratch_.at<cudaIpcMemHandle_t>(0);
    SYMMOE_CUDA_CHECK(cudaMemcpyAsync(slots + rank_, &mine, sizeof mine, cudaMemcpyHostToDevice, stream_));
    SYMMOE_NCCL_CHECK(ncclAllGather(slots + rank_, slots, sizeof mine, ncclUint8, comm_, stream_));
    SYMMOE_CUDA_CHECK(cudaMemcpyAsync(all.data(), slots, world_ * sizeof mine, cudaMemcpyDeviceToHost, stream_));
    SYMMOE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    a.offsets.assign(world_, 0);
    a.mapped.assign(world_, nullptr);
    for (int peer = 0; peer < world_; ++peer) {
      if (peer == rank_) continue;
      const cudaError_t err = cudaIpcOpenMemHandle(&a.mapped[peer], all[peer], cudaIpcMemLazyEnablePeerAccess);
      SYMMOE_CHECK(err == cudaSuccess, "runtime", "rank ", rank_, ": cannot open the IPC handle of peer ", peer, ": ",
                   cudaGetErrorString(err));
      a.offsets[peer] = reinterpret_cast<int64_t>(a.mapped[peer]) - reinterpret_cast<int64_t>(a.base);
    }
    return out;
  }

  void release(std::vector<LocalAllocation>& allocations) override {
    for (auto& a : allocations) {
      for (void* p : a.mapped)
        if (p) cudaIpcCloseMemHandle(p);
      a.mapped.clear();
    }
    host_barrier();  // every peer has unmapped before the owners free
    for (auto& a : allocations) {
      if (a.base) cudaFree(a.base);
      a.base = nullptr;
    }
  }

  void host_barrier() override {
    auto* word = scratch_.base();
    SYMMOE_NCCL_CHECK(ncclAllReduce(word, word, 1, ncclUint8, ncclMax, comm_, stream_));
    SYMMOE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  ncclUniqueId wait_for_unique_id(const std::string& path) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBootstrapTimeoutMs);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(path);
      std::string hex;
      if (in && (in >> hex) && hex.size() == 2 * sizeof(ncclUniqueId::internal)) return from_hex(hex);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    SYMMOE_FAIL("runtime", "rank ", rank_, ": rank 0 did not publish the NCCL unique id at ", path, " within ",
                kBootstrapTimeoutMs / 1000, " s (is rank 0 running?)");
  }

  int rank_ = 0, world_ = 1;
  std::vector<RankPlacement> placement_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  runtime::DeviceBlock scratch_;  // world_ IPC handles; byte 0 doubles as the host-barrier word
};

}  // namespace

std::unique_ptr<Backend> make_multi_process_backend(const BootstrapConfig& cfg) {
  return std::make_unique<MultiProcessBackend>(cfg);
}

}  // namespace symmoe::runtime_detail

namespace symmoe {
std::string new_unique_id_hex() {
  ncclUniqueId id{};
  const ncclResult_t r = ncclGetUniqueId(&id);
  SYMMOE_CHECK(r == ncclSuccess, "nccl", "ncclGetUniqueId failed: ", ncclGetErrorString(r));
  return runtime_detail::to_hex(id);
}
}  // namespace symmoe
