// STUB for the syntax check of python/src/torch_ext/torch_ep.cpp only (see ../../../README.md): not libtorch.
#pragma once
#include <torch/extension.h>

namespace at::detail {
TensorBase empty_cuda(IntArrayRef size, ScalarType dtype, std::optional<Device> device_opt,
                      std::optional<c10::MemoryFormat> memory_format_opt);
}  // namespace at::detail
