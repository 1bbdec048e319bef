// GPU-test helpers: a device buffer that frees itself, every CUDA call checked, poisonable before a kernel writes
// it; the number of visible GPUs; the seeds of the random inputs.
// NOTES: cudaMemcpy / cudaMemset run on the legacy default stream and may return before the device finished them
// (pageable uploads, memsets). The library's rank streams are non-blocking: a call given an explicit stream, or a
// graph replay, is not ordered after that work. So every helper here that writes device memory waits for the legacy
// stream before it returns (an unfinished poison could otherwise land after the kernel's writes).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "symmoe/cuda_check.hpp"

namespace symmoe::test {

inline void finish_legacy_stream() { SYMMOE_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy)); }

// Seeds. Every random input of the GPU tests derives from one session seed: SYMMOE_TEST_SEED (a decimal uint64,
// read here and nowhere else) or, unset, a random one. fresh_seed() returns the n-th seed of the running test,
// mixed from (session seed, test name, n), so one test re-run alone with the same SYMMOE_TEST_SEED
// (--gtest_filter=<its name>) sees the same inputs as in the whole run. gpu_test_main.cpp prints the reproduction
// line after every failed test.
inline uint64_t session_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("SYMMOE_TEST_SEED");
    if (!env || !*env) return (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (!end || *end != '\0' || *env == '-') {
      std::fprintf(stderr, "SYMMOE_TEST_SEED must be a decimal unsigned 64-bit integer, got '%s'\n", env);
      std::exit(2);
    }
    return uint64_t(v);
  }();
  return seed;
}

inline std::string current_test_name() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info ? std::string(info->test_suite_name()) + "." + info->name() : std::string();
}

inline uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t fresh_seed() {
  static std::string test;
  static uint64_t n = 0;
  const std::string name = current_test_name();
  if (name != test) test = name, n = 0;
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the test name
  for (const char c : name) h = (h ^ uint8_t(c)) * 1099511628211ull;
  return mix64(session_seed() ^ mix64(h + n++));
}

// fresh_seed(), printed as "  seed N" (the GEMM tests show the seed of every problem they build).
inline uint64_t printed_seed() {
  const uint64_t seed = fresh_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

// Command-line options of the GPU test binaries beyond gtest's (parsed strictly by gpu_test_main.cpp):
//   --seconds=S   duration of the time-bounded tests (tests/gpu/test_soak.cu); 0: their short default.
inline double& option_seconds() {
  static double seconds = 0;
  return seconds;
}

inline int num_gpus() {
  int n = 0;
  SYMMOE_CUDA_CHECK(cudaGetDeviceCount(&n));
  return n;
}

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceArray(size_t count) : n(count) {
    SYMMOE_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& h) : DeviceArray(h.size()) { upload(h); }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void upload(const std::vector<T>& h) {
    SYMMOE_CUDA_CHECK(cudaMemcpy(ptr, h.data(), std::min(h.size(), n) * sizeof(T), cudaMemcpyHostToDevice));
    finish_legacy_stream();
  }
  std::vector<T> download() const {
    std::vector<T> h(n);
    SYMMOE_CUDA_CHECK(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  // Fill every byte with `byte` (0xFF: NaN for floats, -1 for ints) so unwritten outputs show.
  void poison(int byte = 0xFF) {
    SYMMOE_CUDA_CHECK(cudaMemset(ptr, byte, n * sizeof(T)));
    finish_legacy_stream();
  }
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
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

template <typename T>
DevMem upload(int device, const std::vector<T>& v) {
  DevMem m(device, v.size() * sizeof(T));
  if (!v.empty()) SYMMOE_CUDA_CHECK(cudaMemcpy(m.ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  finish_legacy_stream();
  return m;
}

// Fill `bytes` at `p` on `device` with `byte` so unwritten outputs show (0xFF: bf16/fp32 NaN, int -1).
inline void poison(int device, const void* p, size_t bytes, int byte = 0xFF) {
  SYMMOE_CUDA_CHECK(cudaSetDevice(device));
  if (p && bytes) SYMMOE_CUDA_CHECK(cudaMemset(const_cast<void*>(p), byte, bytes));
  finish_legacy_stream();
}

}  // namespace symmoe::test
