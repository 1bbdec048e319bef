// The DLPack ABI (v0.8 "dltensor" capsules, the form torch, numpy and cupy all exchange), written out from the
// public specification (github.com/dmlc/dlpack). Only what symmoe reads and produces.
#pragma once

#include <cstdint>

namespace symmoe::dlpack {

enum DeviceType : int32_t { kCpu = 1, kCuda = 2, kCudaHost = 3, kCudaManaged = 13 };
enum TypeCode : uint8_t {
  kInt = 0,
  kUInt = 1,
  kFloat = 2,
  kBfloat = 4,
  kBool = 6,
  kFloat8E4m3fn = 10,
  kFloat8E5m2 = 12,
  kFloat8E8m0fnu = 14,
};

struct Device {
  int32_t device_type;
  int32_t device_id;
};
struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null = C-contiguous
  uint64_t byte_offset;
};
struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

// Capsule names of the protocol: a fresh capsule is "dltensor"; a consumer that takes ownership renames it.
inline constexpr const char* kCapsuleName = "dltensor";
inline constexpr const char* kUsedCapsuleName = "used_dltensor";

}  // namespace symmoe::dlpack
