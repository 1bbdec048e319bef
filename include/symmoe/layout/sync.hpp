// Cross-rank synchronisation state: ONE description shared by kernels, host sizing and the planner's layouts.
//
// Contract:
// - `SyncArea` lives inside a rank's symmetric allocation (same offset on every rank). It holds the cross-rank
//   barrier slots (written by peers), the grid-sync counter, the barrier epoch and the error count (touched only
//   by the owning rank). All zero at start; after that it never needs resetting (self-resetting counters), except
//   after a reported timeout, when its owner must zero it collectively (Communicator::reset_sync_state).
// - `ErrorRecord`s live in host-mapped pinned memory (one array per rank, kMaxErrorRecords long), so the host can
//   read them while other ranks' kernels still run. A kernel whose bounded wait times out writes one record and
//   exits; the host turns the records into symmoe::PeerTimeout.
// - `WaitContext` is what a kernel needs to bound its waits (see src/kernels/comm/timeout.cuh).
// NOTES: one kernel at a time per SyncArea (the grid-sync counter and epoch are per rank, not per kernel).
#pragma once

#include <cstddef>
#include <cstdint>

#include "symmoe/common.hpp"

namespace symmoe::layout {

inline constexpr uint32_t kMaxRanks = 72;         // plan for 72 (NVL72); MoeShape::validate uses the same bound
inline constexpr uint32_t kMaxErrorRecords = 16;  // more timeouts are counted, not stored

// Where a bounded wait happened. Other components add their sites here so the host can name them.
enum class WaitSite : uint32_t {
  kGridSync = 1,       // all CTAs of one rank's kernel
  kBarrier = 2,        // cross-rank barrier slot of one peer
  kFlag = 3,           // point-to-point flag (ping-pong, notify)
  kBulkCopy = 4,       // mbarrier completion of a bulk copy from peer memory
  kPackedCounter = 5,  // 64-bit (arrivals << 32 | count) counter
  kMegaL1Arrival = 6,  // fused MoE: rows of an L1 pool block pulled (dispatch warps -> L1 TMA producer)
  kMegaL2Mask = 7,     // fused MoE: L1 n-blocks of a pool block written (L1 epilogue -> L2 TMA producer)
  kTest = 100,         // planted waits in tests
};

SYMMOE_HD constexpr const char* wait_site_name(uint32_t site) {
  switch (site) {
    case uint32_t(WaitSite::kGridSync):
      return "grid_sync";
    case uint32_t(WaitSite::kBarrier):
      return "barrier";
    case uint32_t(WaitSite::kFlag):
      return "flag";
    case uint32_t(WaitSite::kBulkCopy):
      return "bulk_copy";
    case uint32_t(WaitSite::kPackedCounter):
      return "packed_counter";
    case uint32_t(WaitSite::kMegaL1Arrival):
      return "mega_l1_arrival";
    case uint32_t(WaitSite::kMegaL2Mask):
      return "mega_l2_mask";
    case uint32_t(WaitSite::kTest):
      return "test";
    default:
      return "unknown";
  }
}

// One timed-out wait. `valid` is written last (after a system fence), so the host never sees a half record.
struct ErrorRecord {
  uint32_t valid;       // 1 once the record is complete
  uint32_t rank;        // the rank that waited
  uint32_t site;        // WaitSite
  int32_t peer;         // the rank waited for (-1: this rank's own CTAs)
  uint64_t counter;     // address of the counter waited on (in the waiting rank's address space)
  uint64_t expected;    // value the wait needed
  uint64_t seen;        // last value read
  uint64_t elapsed_ns;  // how long it waited
};
static_assert(sizeof(ErrorRecord) == 48, "ErrorRecord is shared by host and device: keep it packed");

inline constexpr size_t kErrorAreaBytes = kMaxErrorRecords * sizeof(ErrorRecord);

// The sync state of one rank, at `base` (128-byte aligned) in its symmetric allocation.
struct SyncArea {
  static constexpr size_t kAlign = 128;
  static constexpr size_t kStateBytes = 128;  // epoch, grid-sync counter, error count; one line, owner only

  uint8_t* base = nullptr;
  uint32_t num_ranks = 0;

  SYMMOE_HD SyncArea() = default;
  SYMMOE_HD SyncArea(void* base_, uint32_t num_ranks_) : base(static_cast<uint8_t*>(base_)), num_ranks(num_ranks_) {}

  // barrier slots: [2 parities][num_ranks sources] uint32, written by the source rank with red.add.release.sys
  SYMMOE_HD static constexpr size_t slots_bytes(uint32_t num_ranks) {
    return align_up<size_t>(2 * size_t(num_ranks) * sizeof(uint32_t), kAlign);
  }
  SYMMOE_HD static constexpr size_t num_bytes(uint32_t num_ranks) { return slots_bytes(num_ranks) + kStateBytes; }

  SYMMOE_HD uint32_t* barrier_slot(uint32_t parity, uint32_t src_rank) const {
    return reinterpret_cast<uint32_t*>(base) + parity * num_ranks + src_rank;
  }
  SYMMOE_HD uint32_t* state() const { return reinterpret_cast<uint32_t*>(base + slots_bytes(num_ranks)); }
  SYMMOE_HD uint32_t* barrier_epoch() const { return state() + 0; }      // barriers completed by this rank
  SYMMOE_HD uint32_t* grid_sync_counter() const { return state() + 1; }  // bit 31 flips once per grid sync
  SYMMOE_HD uint32_t* num_errors() const { return state() + 2; }         // > 0: a wait timed out, abort
};

// What every bounded wait needs (passed by value to kernels).
struct WaitContext {
  ErrorRecord* records = nullptr;  // host-mapped, kMaxErrorRecords
  uint32_t* num_errors = nullptr;  // this rank's SyncArea::num_errors (device memory)
  uint64_t timeout_ns = 0;
  uint32_t rank = 0;
};

}  // namespace symmoe::layout
