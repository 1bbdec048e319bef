// Internal to the golden hybrid dispatch (hybrid_dispatch.cpp, hybrid_dispatch_cached.cpp): the record both hops
// carry, and the sparse buffers they land in (outputs are allocated as the flat model does: reference/validate.hpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "symmoe/reference/dispatch.hpp"

namespace symmoe::ref::hybrid_detail {

// What travels on both hops: the token's payload and the metadata the next hop and the destination need.
struct Record {
  int32_t src_token_global_idx = -1;
  std::vector<int64_t> topk_idx;  // [K] global expert ids
  std::vector<float> topk_weights;
  std::vector<uint8_t> x, sf;
};

// Buffer of one rank: position (as the hybrid metadata names it) -> record. Ordered, so a walk is in position order.
using RecordBuffer = std::map<int64_t, Record>;

// Highest lane of the row whose expert satisfies `owner(e) == target`, or -1.
template <typename Owner>
int master_lane(const int64_t* topk, int K, int target, Owner owner) {
  int master = -1;
  for (int k = 0; k < K; ++k)
    if (topk[k] >= 0 && owner(topk[k]) == target) master = k;
  return master;
}

inline Record make_record(const DispatchInput& in, int src_rank, int token, int K, int T_max) {
  Record r;
  r.src_token_global_idx = src_rank * T_max + token;
  r.topk_idx.assign(in.topk_idx.begin() + size_t(token) * K, in.topk_idx.begin() + size_t(token + 1) * K);
  r.topk_weights.assign(in.topk_weights.begin() + size_t(token) * K, in.topk_weights.begin() + size_t(token + 1) * K);
  r.x.assign(in.x.begin() + size_t(token) * in.x_row_bytes, in.x.begin() + size_t(token + 1) * in.x_row_bytes);
  r.sf.assign(in.x_sf.begin() + size_t(token) * in.sf_row_bytes, in.x_sf.begin() + size_t(token + 1) * in.sf_row_bytes);
  return r;
}

inline void put_row(std::vector<uint8_t>& dst, size_t row, const std::vector<uint8_t>& src) {
  if (!src.empty()) std::memcpy(&dst[row * src.size()], src.data(), src.size());
}

}  // namespace symmoe::ref::hybrid_detail
