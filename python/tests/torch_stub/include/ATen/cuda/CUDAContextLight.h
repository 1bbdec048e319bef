// STUB for the syntax check of python/src/torch_ext/torch_ep.cpp only (see ../../../README.md): not libtorch.
#pragma once
#include <torch/extension.h>

namespace at::cuda {
Allocator* getCUDADeviceAllocator();
}  // namespace at::cuda
