// STUB for the syntax check of python/src/torch_ext/torch_ep.cpp only (see ../../../README.md): not libtorch.
#pragma once
#include <cuda_runtime_api.h>

#include <torch/extension.h>

namespace c10::cuda {
class CUDAStream {
 public:
  cudaStream_t stream() const;
};
CUDAStream getCurrentCUDAStream(DeviceIndex device_index = -1);
}  // namespace c10::cuda
