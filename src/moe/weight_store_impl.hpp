// MoeWeightStore's private state (include/symmoe/weight_store.hpp), shared by the FP8 and the FP4 fill code: one
// device block per local rank, laid out by layout::WeightStoreLayout.
#pragma once

#include <vector>

#include "moe/weight_store_layout.hpp"
#include "runtime/device_block.hpp"
#include "symmoe/common.hpp"
#include "symmoe/gemm.hpp"
#include "symmoe/runtime.hpp"
#include "symmoe/shape.hpp"
#include "symmoe/weight_store.hpp"

namespace symmoe {

struct MoeWeightStore::Impl {
  MoeShape shape;
  gemm::WeightFormat format = gemm::WeightFormat::kFp8;
  std::vector<runtime::DeviceBlock> ranks;  // one block per local rank (layout::WeightStoreLayout)
  void allocate(const Communicator& comm, const MoeShape& s, gemm::WeightFormat f) {
    s.validate();
    SYMMOE_CHECK(s.num_ranks == comm.num_ranks(), "moe", "weights for ", s.num_ranks, " ranks, the communicator has ",
                 comm.num_ranks());
    shape = s;
    format = f;
    const layout::WeightStoreLayout l(s, f);
    for (const RankPlacement& p : comm.local_ranks()) ranks.emplace_back(p.device, l.num_bytes());
  }
};

}  // namespace symmoe
