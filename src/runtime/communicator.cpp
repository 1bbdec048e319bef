// Communicator: backend-independent part. Streams per local rank, symmetric allocations, the communicator's own
// sync state (layout::SyncArea in a small symmetric buffer), host-mapped error records and their reader.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "runtime/backend.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/env.hpp"
#include "symmoe/log.hpp"

namespace symmoe {

using runtime_detail::DeviceGuard;

// ---------------- SymmetricBuffer ----------------
struct SymmetricBuffer::Impl {
  runtime_detail::Backend* backend = nullptr;
  size_t num_bytes = 0;
  int num_ranks = 0;
  std::vector<int> local_index;  // rank -> index into allocations, -1 when not local
  std::vector<runtime_detail::LocalAllocation> allocations;

  const runtime_detail::LocalAllocation& at(int rank) const {
    SYMMOE_CHECK(rank >= 0 && rank < num_ranks && local_index[rank] >= 0, "runtime", "rank ", rank,
                 " is not driven by this process (world ", num_ranks, ")");
    return allocations[local_index[rank]];
  }
  ~Impl() {
    try {
      if (backend) backend->release(allocations);
    } catch (const std::exception& e) {
      SYMMOE_LOG(kError, "runtime", "releasing a symmetric buffer failed: ", e.what());
    }
  }
};

SymmetricBuffer::SymmetricBuffer() = default;
SymmetricBuffer::SymmetricBuffer(SymmetricBuffer&&) noexcept = default;
SymmetricBuffer& SymmetricBuffer::operator=(SymmetricBuffer&&) noexcept = default;
SymmetricBuffer::~SymmetricBuffer() = default;

size_t SymmetricBuffer::num_bytes() const { return impl_ ? impl_->num_bytes : 0; }
int SymmetricBuffer::num_ranks() const { return impl_ ? impl_->num_ranks : 0; }
bool SymmetricBuffer::is_local(int rank) const {
  return impl_ && rank >= 0 && rank < impl_->num_ranks && impl_->local_index[rank] >= 0;
}
void* SymmetricBuffer::ptr(int rank) const {
  SYMMOE_CHECK(impl_, "runtime", "empty SymmetricBuffer");
  return impl_->at(rank).base;
}
int64_t SymmetricBuffer::offset(int rank, int peer) const {
  SYMMOE_CHECK(impl_, "runtime", "empty SymmetricBuffer");
  SYMMOE_CHECK(peer >= 0 && peer < impl_->num_ranks, "runtime", "peer ", peer, " out of [0, ", impl_->num_ranks, ")");
  return impl_->at(rank).offsets[peer];
}

// ---------------- Communicator ----------------
struct Communicator::Impl {
  std::unique_ptr<runtime_detail::Backend> backend;
  std::vector<int> local_index;
  std::vector<cudaStream_t> streams;              // per local rank
  std::vector<cudaEvent_t> legacy_done;           // per local rank: call_stream's wait on the legacy stream
  std::vector<layout::ErrorRecord*> error_areas;  // per local rank, host-mapped
  SymmetricBuffer sync;
  uint64_t timeout_ns = 0;

  int index(int rank) const {
    SYMMOE_CHECK(rank >= 0 && rank < int(local_index.size()) && local_index[rank] >= 0, "runtime", "rank ", rank,
                 " is not driven by this process (world ", local_index.size(), ")");
    return local_index[rank];
  }
  ~Impl() {
    sync = SymmetricBuffer();  // before the backend goes
    for (size_t i = 0; i < streams.size(); ++i) {
      if (streams[i]) cudaStreamDestroy(streams[i]);
      if (legacy_done[i]) cudaEventDestroy(legacy_done[i]);
      if (error_areas[i]) cudaFreeHost(error_areas[i]);
    }
  }
};

Communicator::Communicator() : impl_(std::make_unique<Impl>()) {}

// timeout_ms < 0: SYMMOE_TIMEOUT_MS, default 10 s (a healthy NVLink wait takes microseconds).
static uint64_t wait_timeout_ns(int timeout_ms) {
  const long long ms = timeout_ms >= 0 ? timeout_ms : env::get_int("TIMEOUT_MS", 10000);
  SYMMOE_CHECK(ms > 0, "runtime", "the device wait timeout must be positive, got ", ms,
               " ms (argument or SYMMOE_TIMEOUT_MS)");
  return uint64_t(ms) * 1000000ull;
}
Communicator::~Communicator() = default;

std::unique_ptr<Communicator> Communicator::in_process(int num_ranks, int timeout_ms) {
  std::unique_ptr<Communicator> c(new Communicator());
  auto& impl = *c->impl_;
  impl.timeout_ns = wait_timeout_ns(timeout_ms);
  impl.backend = runtime_detail::make_in_process_backend(num_ranks);
  c->init_local_state();
  return c;
}

std::unique_ptr<Communicator> Communicator::multi_process(const BootstrapConfig& cfg, int timeout_ms) {
  std::unique_ptr<Communicator> c(new Communicator());
  auto& impl = *c->impl_;
  impl.timeout_ns = wait_timeout_ns(timeout_ms);
  impl.backend = runtime_detail::make_multi_process_backend(cfg);
  c->init_local_state();
  return c;
}

std::unique_ptr<Communicator> Communicator::from_env(int in_process_ranks, int timeout_ms) {
  if (multi_process_env_present()) return multi_process(bootstrap_config_from_env(), timeout_ms);
  return in_process(in_process_ranks, timeout_ms);
}

void Communicator::init_local_state() {
  auto& impl = *impl_;
  const auto& locals = impl.backend->local_ranks();
  impl.local_index.assign(impl.backend->num_ranks(), -1);
  impl.streams.assign(locals.size(), nullptr);
  impl.legacy_done.assign(locals.size(), nullptr);
  impl.error_areas.assign(locals.size(), nullptr);
  for (size_t i = 0; i < locals.size(); ++i) {
    impl.local_index[locals[i].rank] = int(i);
    DeviceGuard guard(locals[i].device);
    SYMMOE_CUDA_CHECK(cudaStreamCreateWithFlags(&impl.streams[i], cudaStreamNonBlocking));
    SYMMOE_CUDA_CHECK(cudaEventCreateWithFlags(&impl.legacy_done[i], cudaEventDisableTiming));
    void* host = nullptr;
    SYMMOE_CUDA_CHECK(cudaHostAlloc(&host, layout::kErrorAreaBytes, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(host, 0, layout::kErrorAreaBytes);
    impl.error_areas[i] = static_cast<layout::ErrorRecord*>(host);
  }
  impl.sync = alloc_symmetric(layout::SyncArea::num_bytes(uint32_t(num_ranks())));
}

Backend Communicator::backend() const { return impl_->backend->kind(); }
int Communicator::num_ranks() const { return impl_->backend->num_ranks(); }
const std::vector<RankPlacement>& Communicator::local_ranks() const { return impl_->backend->local_ranks(); }
bool Communicator::is_local(int rank) const {
  return rank >= 0 && rank < int(impl_->local_index.size()) && impl_->local_index[rank] >= 0;
}
const RankPlacement& Communicator::placement(int rank) const { return local_ranks()[impl_->index(rank)]; }
cudaStream_t Communicator::stream(int rank) const { return impl_->streams[impl_->index(rank)]; }
cudaStream_t Communicator::call_stream(int rank, cudaStream_t user) const {
  if (user) return user;
  const int i = impl_->index(rank);
  cudaStream_t s = impl_->streams[i];
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SYMMOE_CUDA_CHECK(cudaStreamIsCapturing(s, &capture));
  if (capture != cudaStreamCaptureStatusNone) return s;
  DeviceGuard guard(placement(rank).device);
  SYMMOE_CUDA_CHECK(cudaEventRecord(impl_->legacy_done[i], cudaStreamLegacy));
  SYMMOE_CUDA_CHECK(cudaStreamWaitEvent(s, impl_->legacy_done[i], 0));
  return s;
}
uint64_t Communicator::timeout_ns() const { return impl_->timeout_ns; }
const SymmetricBuffer& Communicator::sync_buffer() const { return impl_->sync; }

SymmetricBuffer Communicator::alloc_symmetric(size_t num_bytes) {
  SYMMOE_CHECK(num_bytes > 0, "runtime", "alloc_symmetric: num_bytes must be > 0");
  SymmetricBuffer buf;
  buf.impl_ = std::make_unique<SymmetricBuffer::Impl>();
  auto& b = *buf.impl_;
  b.num_bytes = num_bytes;
  b.num_ranks = num_ranks();
  b.local_index = impl_->local_index;
  b.allocations = impl_->backend->allocate(num_bytes);
  b.backend = impl_->backend.get();
  return buf;
}

layout::SyncArea Communicator::sync_area(int rank) const {
  return layout::SyncArea(impl_->sync.ptr(rank), uint32_t(num_ranks()));
}

layout::WaitContext Communicator::wait_context(int rank) const {
  layout::WaitContext ctx;
  ctx.records = impl_->error_areas[impl_->index(rank)];  // UVA: the host pointer is valid on the device
  ctx.num_errors = sync_area(rank).num_errors();
  ctx.timeout_ns = impl_->timeout_ns;
  ctx.rank = uint32_t(rank);
  return ctx;
}

void Communicator::host_barrier() { impl_->backend->host_barrier(); }

void Communicator::synchronize() {
  for (const auto& p : local_ranks()) {
    DeviceGuard guard(p.device);
    const cudaError_t err = cudaStreamSynchronize(stream(p.rank));
    SYMMOE_CHECK(err == cudaSuccess, "runtime", "rank ", p.rank, " (GPU ", p.device,
                 "): stream failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  }
  check_errors();
}

std::vector<layout::ErrorRecord> Communicator::error_records() const {
  std::vector<layout::ErrorRecord> out;
  for (const auto* area : impl_->error_areas) {
    for (uint32_t i = 0; i < layout::kMaxErrorRecords; ++i) {
      const volatile layout::ErrorRecord* r = area + i;
      if (r->valid != 1) continue;
      layout::ErrorRecord copy;
      std::memcpy(&copy, const_cast<const layout::ErrorRecord*>(r), sizeof copy);
      out.push_back(copy);
    }
  }
  return out;
}

void Communicator::check_errors() const { throw_if_timed_out(error_records(), detail::site(__FILE__, __LINE__)); }

void Communicator::reset_sync_state() {
  for (const auto& p : local_ranks()) {
    DeviceGuard guard(p.device);
    SYMMOE_CUDA_CHECK(cudaStreamSynchronize(stream(p.rank)));
  }
  host_barrier();  // no rank still runs a kernel that touches a peer's slots
  for (const auto& p : local_ranks()) {
    DeviceGuard guard(p.device);
    SYMMOE_CUDA_CHECK(cudaMemset(impl_->sync.ptr(p.rank), 0, impl_->sync.num_bytes()));
    SYMMOE_CUDA_CHECK(cudaDeviceSynchronize());
    std::memset(impl_->error_areas[impl_->index(p.rank)], 0, layout::kErrorAreaBytes);
  }
  host_barrier();
}

}  // namespace symmoe
