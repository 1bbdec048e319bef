// Multi-rank runtime: ranks, symmetric memory and the host side of device synchronisation (docs/design.md §4).
//
// Contract:
// - A rank is (device, symmetric allocation, stream). A Communicator drives the ranks of this process: all R
//   ranks in-process (virtual ranks, round-robin over the visible GPUs) or one rank per process (multi-process,
//   RANK / WORLD_SIZE / LOCAL_RANK, NCCL bootstrap, CUDA IPC handles exchanged by an NCCL all-gather).
// - SymmetricBuffer: num_bytes on every rank, zero-filled at allocation; kernels reach a peer's copy only through
//   comm::SymBuffer::map(ptr, rank) (src/kernels/comm/sym_buffer.cuh, built by make_sym_buffer()).
// - Collective calls (creation, alloc_symmetric, buffer destruction, host_barrier, reset_sync_state) must be made
//   by every process in the same order. The Communicator must outlive its buffers.
// - Every device wait is bounded (timeout_ns, default SYMMOE_TIMEOUT_MS); a timed-out wait leaves an
//   layout::ErrorRecord that synchronize()/check_errors() turn into PeerTimeout naming the stalled peer. After a
//   PeerTimeout, call reset_sync_state() (collective) before the next cross-rank kernel.
// - In-process: all ranks' kernels are launched from one host thread (launches are asynchronous, so one thread
//   keeps them concurrent; no host-side races). Each rank's kernels must use at most placement().num_sms CTAs of
//   one SM each, so every persistent CTA of every rank on a GPU is co-resident and cross-rank spins cannot
//   deadlock. At most 8 ranks per GPU (CUDA's default 8 hardware queues; more would serialise streams).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "symmoe/common.hpp"
#include "symmoe/layout/sync.hpp"

namespace symmoe {

// A bounded device wait timed out. rank() waited for peer() at wait_site(); records() holds every record read.
class PeerTimeout : public Error {
 public:
  PeerTimeout(std::string site, std::vector<layout::ErrorRecord> records, size_t blamed, const std::string& message);
  int rank() const { return int(blamed_.rank); }
  int peer() const { return blamed_.peer; }  // -1: the rank's own CTAs (grid sync)
  std::string wait_site() const { return layout::wait_site_name(blamed_.site); }
  uint64_t counter() const { return blamed_.counter; }
  uint64_t expected() const { return blamed_.expected; }
  uint64_t seen() const { return blamed_.seen; }
  const std::vector<layout::ErrorRecord>& records() const { return records_; }

 private:
  std::vector<layout::ErrorRecord> records_;
  layout::ErrorRecord blamed_;
};

// Picks the record that names the root cause: a wait on a peer that itself recorded no wait (it never arrived);
// otherwise the first record. Throws PeerTimeout; returns normally when `records` is empty.
void throw_if_timed_out(const std::vector<layout::ErrorRecord>& records, const std::string& site);

// ---- rank placement (in-process backend) ----
struct RankPlacement {
  int rank = 0;
  int device = 0;           // CUDA device ordinal
  int index_on_device = 0;  // 0 .. ranks_on_device-1
  int ranks_on_device = 1;
  int num_sms = 0;  // CTAs (one per SM) this rank's persistent kernels may use
};
// Rank r goes to device r % num_devices; each gets floor(sms_per_device / ranks_on_device) SMs.
std::vector<RankPlacement> place_ranks_in_process(int num_ranks, int num_devices, int sms_per_device);

// ---- bootstrap (multi-process backend) ----
struct BootstrapConfig {
  int rank = -1;
  int world_size = 0;
  int local_rank = -1;        // CUDA device of this process
  std::string unique_id_hex;  // SYMMOE_UNIQUE_ID: the NCCL unique id (256 hex digits), or
  std::string bootstrap_dir;  // SYMMOE_BOOTSTRAP_DIR: rank 0 writes the id there (`symmoe launch` sets it)
};
using EnvLookup = std::function<const char*(const char*)>;  // name -> value or nullptr
// Reads RANK, WORLD_SIZE, LOCAL_RANK, SYMMOE_UNIQUE_ID, SYMMOE_BOOTSTRAP_DIR; throws naming the bad variable.
BootstrapConfig bootstrap_config_from_env(const EnvLookup& lookup = nullptr);
bool multi_process_env_present(const EnvLookup& lookup = nullptr);  // WORLD_SIZE is set
// Claims `rank` of bootstrap round `generation` in `dir` (exclusive file create): a second process with the same
// RANK gets an error instead of a hung NCCL init.
void claim_rank(const std::string& dir, int generation, int rank, int world_size);
// A fresh NCCL unique id as hex (BootstrapConfig::unique_id_hex): rank 0 makes it, the launcher or the caller's
// process group shares it.
std::string new_unique_id_hex();

// ---- symmetric memory ----
namespace runtime_detail {
class Backend;
}

class SymmetricBuffer {
 public:
  SymmetricBuffer();
  SymmetricBuffer(SymmetricBuffer&&) noexcept;
  SymmetricBuffer& operator=(SymmetricBuffer&&) noexcept;
  ~SymmetricBuffer();  // collective in multi-process (peers unmap before the owner frees)

  size_t num_bytes() const;
  int num_ranks() const;
  bool is_local(int rank) const;
  void* ptr(int rank) const;                 // this local rank's allocation (device pointer)
  int64_t offset(int rank, int peer) const;  // base(peer) - base(rank) in this process's address space

 private:
  friend class Communicator;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

enum class Backend { kInProcess, kMultiProcess };

class Communicator {
 public:
  // num_ranks virtual ranks over all visible GPUs. timeout_ms < 0: SYMMOE_TIMEOUT_MS (default 10000).
  static std::unique_ptr<Communicator> in_process(int num_ranks, int timeout_ms = -1);
  // This process is rank cfg.rank of cfg.world_size (one GPU: cfg.local_rank).
  static std::unique_ptr<Communicator> multi_process(const BootstrapConfig& cfg, int timeout_ms = -1);
  // Multi-process when WORLD_SIZE is set, else in-process with in_process_ranks.
  static std::unique_ptr<Communicator> from_env(int in_process_ranks, int timeout_ms = -1);
  ~Communicator();

  Backend backend() const;
  int num_ranks() const;
  const std::vector<RankPlacement>& local_ranks() const;  // the ranks this process drives
  bool is_local(int rank) const;                          // driven by this process
  const RankPlacement& placement(int rank) const;         // local ranks only
  cudaStream_t stream(int rank) const;                    // non-blocking stream on the rank's device
  // The stream a layer call of `rank` runs on: `user` when given. Otherwise the rank's own stream, first made to
  // wait for the work already queued on the device's legacy default stream (cudaMemcpy, cudaMemset, launches
  // without a stream), so inputs written that way before the call are seen and outputs poisoned that way are not
  // overwritten afterwards. While that stream is being captured into a CUDA graph the graph orders its own nodes
  // and no wait is added.
  cudaStream_t call_stream(int rank, cudaStream_t user) const;
  uint64_t timeout_ns() const;

  SymmetricBuffer alloc_symmetric(size_t num_bytes);  // collective, zero-filled, 256-byte aligned bases

  // The communicator's own sync state: layout::SyncArea at offset 0 of a small symmetric buffer.
  const SymmetricBuffer& sync_buffer() const;
  layout::SyncArea sync_area(int rank) const;
  layout::WaitContext wait_context(int rank) const;

  void host_barrier();        // every process (NCCL all-reduce in multi-process); no device work ordered
  void synchronize();         // sync local streams (CUDA errors first), then check_errors()
  void check_errors() const;  // throws PeerTimeout if a wait of a local rank timed out
  std::vector<layout::ErrorRecord> error_records() const;  // local ranks, valid records only
  void reset_sync_state();                                 // collective: zero sync areas and error records

 private:
  Communicator();
  void init_local_state();  // streams, error areas, sync buffer
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `iterations` whole-rank barriers (grid sync + cross-rank + grid sync) in one kernel on `rank`'s stream, with
// num_ctas CTAs (0: the rank's SM share). Asynchronous: launch on every local rank, then synchronize().
void launch_barrier(const Communicator& comm, int rank, int num_ctas, int iterations);

}  // namespace symmoe
