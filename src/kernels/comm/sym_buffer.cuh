// Device view of a symmetric buffer (docs/design.md §4.2): every rank holds an allocation of the same size;
// `map(ptr, rank)` turns a pointer into this rank's allocation into the same offset of `rank`'s allocation.
// NOTES: offsets[i] = base_i - base_self in this process's address space (peer memory mapped by peer access or
// CUDA IPC). Kernels reach peers only through map(); they never index raw peer-pointer arrays.
#pragma once

#include <cstdint>

#include "symmoe/common.hpp"
#include "symmoe/layout/sync.hpp"

namespace symmoe::comm {

struct SymBuffer {
  int64_t base = 0;                         // this rank's allocation
  int64_t offsets[layout::kMaxRanks] = {};  // offsets[i] = base_i - base
  uint32_t rank = 0;
  uint32_t num_ranks = 0;

  template <typename T>
  SYMMOE_HD T* map(T* ptr, uint32_t dst_rank) const {
    return reinterpret_cast<T*>(reinterpret_cast<int64_t>(ptr) + offsets[dst_rank]);
  }
  template <typename T = uint8_t>
  SYMMOE_HD T* local(size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(base + int64_t(byte_offset));
  }
};

}  // namespace symmoe::comm

#include "symmoe/runtime.hpp"

namespace symmoe::comm {

// Host: the view of `buf` that `rank` (a local rank) passes to its kernels.
inline SymBuffer make_sym_buffer(const SymmetricBuffer& buf, int rank) {
  SYMMOE_CHECK(buf.is_local(rank), "runtime", "make_sym_buffer: rank ", rank, " is not driven by this process");
  SymBuffer view;
  view.base = reinterpret_cast<int64_t>(buf.ptr(rank));
  view.rank = uint32_t(rank);
  view.num_ranks = uint32_t(buf.num_ranks());
  for (int peer = 0; peer < buf.num_ranks(); ++peer) view.offsets[peer] = buf.offset(rank, peer);
  return view;
}

}  // namespace symmoe::comm
