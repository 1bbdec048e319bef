// Buffer-layout vocabulary shared by every layout (EP buffer, MegaMoE workspace): aligned regions built in one list.
//
// Contract: a layout is a struct built from sizes and a base address. Its constructor lists every region once, in
// order, with its size formula and alignment (RegionList::add); on the host with a null base it answers
// num_bytes(), in a kernel with the real base it hands out typed pointers. No offset arithmetic lives anywhere else.
// Plain integer math only, no CUDA headers: g++ compiles these too (SYMMOE_HD is __host__ __device__ under nvcc).
// NOTES: sizes and offsets are uint64_t: R*T_max token records exceed 4 GiB for large shapes.
#pragma once

#include <cstdint>

#include "symmoe/common.hpp"

namespace symmoe::layout {

// Alignments (bytes). Every region gets at least kAlignMin.
constexpr uint32_t kAlignMin = 16;        // 16-byte vector loads/stores, cp.async.bulk source/destination
constexpr uint32_t kAlignBulk = 128;      // TMA / bulk-copy destinations, one cache line (no false sharing of rows)
constexpr uint32_t kAlignSwizzle = 1024;  // 128B-swizzled TMA tiles (shared memory; also the base of every layout)
// A layout's base must be aligned to this; its num_bytes() is a multiple of it, so layouts can be stacked.
constexpr uint32_t kBaseAlignment = kAlignSwizzle;
// Host-carved device scratch (one cudaMalloc block per layout, never stacked): every array starts on this boundary,
// as if it had its own cudaMalloc, and the block's size is a multiple of it.
constexpr uint32_t kAlignScratch = 256;

struct Region {
  const char* name = nullptr;  // for `symmoe plan` and error messages; kernels never read it
  uint64_t offset = 0;         // from the layout's base
  uint64_t num_bytes = 0;
  uint32_t alignment = 0;
};

// The ordered region list of one layout. Regions must be added with ids 0, 1, 2, ... in order (the id is the
// layout's enum value); each starts at the next multiple of its alignment after the previous one. num_bytes() rounds
// the end up to kEndAlignment: kBaseAlignment for layouts that stack, kAlignScratch for a whole cudaMalloc block.
template <int kNumRegions, uint32_t kEndAlignment = kBaseAlignment>
class RegionList {
 public:
  SYMMOE_HD constexpr void add(int id, const char* name, uint64_t num_bytes, uint32_t alignment) {
    // An out-of-order id would silently alias regions; num_added_ makes the test suite catch it.
    if (id != num_added_) num_out_of_order_ += 1;
    cursor_ = align_up<uint64_t>(cursor_, alignment);
    regions_[id] = Region{name, cursor_, num_bytes, alignment};
    cursor_ += num_bytes;
    num_added_ += 1;
  }
  SYMMOE_HD constexpr const Region& operator[](int id) const { return regions_[id]; }
  SYMMOE_HD constexpr uint64_t offset(int id) const { return regions_[id].offset; }
  // End of the last region rounded up to kEndAlignment.
  SYMMOE_HD constexpr uint64_t num_bytes() const { return align_up<uint64_t>(cursor_, kEndAlignment); }
  // True when every region was added exactly once, in id order.
  SYMMOE_HD constexpr bool complete() const { return num_added_ == kNumRegions && num_out_of_order_ == 0; }
  static constexpr int size() { return kNumRegions; }

 private:
  Region regions_[kNumRegions] = {};
  uint64_t cursor_ = 0;
  int num_added_ = 0;
  int num_out_of_order_ = 0;
};

// A layout's base as an integer (layouts keep integer bases: a null host base sizes, a real one hands out pointers,
// and tests may place a layout at a fake address).
SYMMOE_HD uint64_t address_of(const void* base) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base)); }

// Typed pointer at `offset` bytes from an integer base (integer math: a null host base is fine).
template <typename T>
SYMMOE_HD T* at_offset(uint64_t base, uint64_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

SYMMOE_HD constexpr uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

}  // namespace symmoe::layout
