// The one layout of a rank's weight allocation in MoeWeightStore (include/symmoe/weight_store.hpp), FP8 or FP4:
// byte offsets of its arrays, each 256-byte aligned, and the store's private state (shared by the FP8 and the FP4
// fill code).
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/device_block.hpp"
#include "symmoe/common.hpp"
#include "symmoe/gemm.hpp"
#include "symmoe/runtime.hpp"
#include "symmoe/shape.hpp"
#include "symmoe/weight_store.hpp"

namespace symmoe {

// Per local expert, in elements of each array (weight_store.hpp's layouts); the FP4 rows pack two values per byte.
struct ExpertArraySizes {
  size_t w1_bytes, w1_scales, w2_bytes, w2_scales, w1_codes, w2_codes;
  ExpertArraySizes(const MoeShape& s, gemm::WeightFormat f) {
    const size_t H = size_t(s.hidden), I = size_t(s.intermediate);
    const size_t per_byte = f == gemm::WeightFormat::kFp4 ? 2 : 1;
    w1_bytes = 2 * I * H / per_byte, w2_bytes = H * I / per_byte;
    w1_scales = (I / 128) * (H / 128) * 2, w2_scales = (H / 128) * (I / 128);
    w1_codes = f == gemm::WeightFormat::kFp4 ? (H / 128) * 2 * I : 0;
    w2_codes = f == gemm::WeightFormat::kFp4 ? (I / 128) * H : 0;
  }
  size_t total_bytes() const { return w1_bytes + w2_bytes + (w1_scales + w2_scales + w1_codes + w2_codes) * 4; }
};

// Byte offsets of one rank's arrays in its allocation (256-byte aligned); FP8: w1, w1_scales, w2, w2_scales; FP4:
// the same, then w1_codes, w2_codes.
struct RankLayout {
  size_t w1 = 0, w1_scales = 0, w2 = 0, w2_scales = 0, w1_codes = 0, w2_codes = 0, total = 0;
  RankLayout(const MoeShape& s, gemm::WeightFormat f) {
    const size_t El = size_t(s.num_local_experts());
    const ExpertArraySizes e(s, f);
    auto take = [this](size_t bytes) {
      const size_t at = total;
      total = align_up<size_t>(total + bytes, 256);
      return at;
    };
    w1 = take(El * e.w1_bytes);
    w1_scales = take(El * e.w1_scales * 4);
    w2 = take(El * e.w2_bytes);
    w2_scales = take(El * e.w2_scales * 4);
    if (f == gemm::WeightFormat::kFp4) {
      w1_codes = take(El * e.w1_codes * 4);
      w2_codes = take(El * e.w2_codes * 4);
    }
  }
};

struct MoeWeightStore::Impl {
  MoeShape shape;
  gemm::WeightFormat format = gemm::WeightFormat::kFp8;
  std::vector<runtime::DeviceBlock> ranks;  // one block per local rank (RankLayout)
  void allocate(const Communicator& comm, const MoeShape& s, gemm::WeightFormat f) {
    s.validate();
    SYMMOE_CHECK(s.num_ranks == comm.num_ranks(), "moe", "weights for ", s.num_ranks, " ranks, the communicator has ",
                 comm.num_ranks());
    shape = s;
    format = f;
    const RankLayout l(s, f);
    for (const RankPlacement& p : comm.local_ranks()) ranks.emplace_back(p.device, l.total);
  }
};

}  // namespace symmoe
