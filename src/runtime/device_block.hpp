// The one RAII device allocation of the host code: a cudaMalloc block on one device, freed on that device when the
// owner goes (or on release()). Callers carve their arrays out of base().
// NOTES: cudaFree synchronises the device; the destructor ignores CUDA errors (it may run while an error unwinds).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "symmoe/cuda_check.hpp"

namespace symmoe::runtime {

class DeviceBlock {
 public:
  DeviceBlock() = default;
  DeviceBlock(int device, size_t bytes) { allocate(device, bytes); }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  DeviceBlock(DeviceBlock&& o) noexcept { swap(o); }
  DeviceBlock& operator=(DeviceBlock&& o) noexcept {
    DeviceBlock gone(std::move(*this));
    swap(o);
    return *this;
  }
  ~DeviceBlock() { release(); }

  // Frees the previous block, then allocates `bytes` (at least 256) on `device` (left current).
  void allocate(int device, size_t bytes) {
    release();
    device_ = device;
    SYMMOE_CUDA_CHECK(cudaSetDevice(device));
    SYMMOE_CUDA_CHECK(cudaMalloc(&base_, std::max<size_t>(bytes, 256)));
    bytes_ = bytes;
  }
  void release() {
    if (base_) {
      cudaSetDevice(device_);
      cudaFree(base_);
    }
    base_ = nullptr;
    bytes_ = 0;
  }

  uint8_t* base() const { return static_cast<uint8_t*>(base_); }
  template <typename T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(base() + offset);
  }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  explicit operator bool() const { return base_ != nullptr; }

 private:
  void swap(DeviceBlock& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
  }
  void* base_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

}  // namespace symmoe::runtime
