// The host error for a bad routing entry found on the device (src/kernels/common/input_error.hpp).
#include "kernels/common/input_error.hpp"

#include "symmoe/common.hpp"

namespace symmoe {

void raise_input_error(volatile kernel::InputError* record, int rank, int num_experts, const char* component) {
  if (!record->valid) return;
  const kernel::InputError e{record->value, record->token, record->lane, record->kind, record->first_lane, 1, 0};
  record->valid = 0;
  if (e.kind == int32_t(kernel::InputErrorKind::kDuplicate))
    SYMMOE_FAIL(component, "dispatch rank ", rank, " token ", e.token, " lane ", e.lane, ": expert ", e.value,
                " duplicates lane ", e.first_lane, " (the rank sent nothing)");
  SYMMOE_FAIL(component, "dispatch rank ", rank, " token ", e.token, " lane ", e.lane, ": expert id ", e.value,
              " outside [-1, ", num_experts, ") (the rank sent nothing)");
}

}  // namespace symmoe
