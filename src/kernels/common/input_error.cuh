// Device side of the bad-routing record (input_error.hpp): one routine that writes the host-visible record, used by
// EP dispatch (kernels/ep/notify.cuh) and the fused layer (kernels/mega/dispatch.cuh), so both report the same
// fields for the same entry.
#pragma once

#include <cstdint>

#include "kernels/common/input_error.hpp"
#include "kernels/ptx/sync.cuh"

namespace symmoe::kernel {

// One thread. `key`: the reported entry (input_error_key); `token_experts`: the K expert ids of its token. Fills
// value, token, lane, kind and (duplicates) the first earlier lane with the same expert, then publishes `valid`
// after a system-scope fence so the host never reads a half-written record.
__device__ __forceinline__ void write_input_error(InputError* record, unsigned long long key,
                                                  const int64_t* token_experts) {
  const int lane = input_error_lane(key);
  const int64_t value = token_experts[lane];
  int first = -1;
  for (int j = 0; j < lane && first < 0; ++j)
    if (token_experts[j] == value) first = j;
  record->value = value;
  record->token = input_error_token(key);
  record->lane = lane;
  record->kind = input_error_kind(key);
  record->first_lane = first;
  __threadfence_system();
  ptx::st_relaxed_sys(&record->valid, 1u);
}

}  // namespace symmoe::kernel
