// GPU-test helpers: a device buffer that frees itself, every CUDA call checked, poisonable before a kernel writes
// it; the number of visible GPUs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "symmoe/cuda_check.hpp"

namespace symmoe::test {

inline int num_gpus() {
  int n = 0;
  SYMMOE_CUDA_CHECK(cudaGetDeviceCount(&n));
  return n;
}

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceArray(size_t count) : n(count) { SYMMOE_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T))); }
  explicit DeviceArray(const std::vector<T>& h) : DeviceArray(h.size()) { upload(h); }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void upload(const std::vector<T>& h) {
    SYMMOE_CUDA_CHECK(cudaMemcpy(ptr, h.data(), std::min(h.size(), n) * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> h(n);
    SYMMOE_CUDA_CHECK(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  // Fill every byte with `byte` (0xFF: NaN for floats, -1 for ints) so unwritten outputs show.
  void poison(int byte = 0xFF) { SYMMOE_CUDA_CHECK(cudaMemset(ptr, byte, n * sizeof(T))); }
};

// Untyped allocation on a given device (multi-GPU tests: each rank's buffers live on its own device).
struct DevMem {
  void* ptr = nullptr;
  int device = 0;
  size_t bytes = 0;
  DevMem() = default;
  DevMem(int dev, size_t n) : device(dev), bytes(n) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(dev));
    SYMMOE_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(n, 16)));
  }
  DevMem(DevMem&& o) noexcept : ptr(o.ptr), device(o.device), bytes(o.bytes) { o.ptr = nullptr; }
  DevMem(const DevMem&) = delete;
  ~DevMem() {
    if (ptr) cudaSetDevice(device), cudaFree(ptr);
  }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr); }
};

template <typename T>
DevMem upload(int device, const std::vector<T>& v) {
  DevMem m(device, v.size() * sizeof(T));
  if (!v.empty()) SYMMOE_CUDA_CHECK(cudaMemcpy(m.ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return m;
}

}  // namespace symmoe::test
