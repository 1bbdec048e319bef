// A bad routing entry found on the device (EP dispatch and the fused layer check the same things the same way):
// an expert id outside [-1, E), or a valid expert repeated within one token (reported at the later lane). The
// record lives in host-mapped memory; `valid` is written last. raise_input_error() (src/common/input_error.cpp)
// turns it into the one host error both layers raise.
#pragma once

#include <cstdint>

#include "symmoe/layout/common.hpp"

namespace symmoe::kernel {

enum class InputErrorKind : int32_t { kNone = 0, kOutOfRange = 1, kDuplicate = 2 };

struct InputError {
  int64_t value;
  int32_t token, lane, kind, first_lane;  // first_lane: the earlier lane with the same expert (duplicates)
  uint32_t valid;
  uint32_t pad;
};

// Orders errors by (token, lane): the smallest key is the one reported.
SYMMOE_HD constexpr unsigned long long input_error_key(int token, int lane, InputErrorKind kind) {
  return (static_cast<unsigned long long>(token) << 32) | (static_cast<unsigned long long>(lane) << 8) |
         static_cast<unsigned long long>(kind);
}
SYMMOE_HD constexpr int input_error_token(unsigned long long key) { return int(key >> 32); }
SYMMOE_HD constexpr int input_error_lane(unsigned long long key) { return int((key >> 8) & 0xff); }
SYMMOE_HD constexpr int32_t input_error_kind(unsigned long long key) { return int32_t(key & 0xff); }

}  // namespace symmoe::kernel

namespace symmoe {
// Reads `record` (host-mapped, written by a kernel of `rank`); when valid, clears it and throws the error every
// layer raises for bad routing: "dispatch rank R token T lane L: expert id V outside [-1, E) (the rank sent
// nothing)" or "...: expert V duplicates lane J (the rank sent nothing)". `component` names the layer.
void raise_input_error(volatile kernel::InputError* record, int rank, int num_experts, const char* component);
}  // namespace symmoe
