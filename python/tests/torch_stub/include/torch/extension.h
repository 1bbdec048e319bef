// STUB for the syntax check of python/src/torch_ext/torch_ep.cpp only (see ../../README.md): not libtorch.
#pragma once
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>

namespace c10 {
using DeviceIndex = int8_t;
enum class ScalarType : int8_t { Byte, Int, Long, Float, BFloat16, Float8_e4m3fn };
enum class DeviceType : int8_t { CPU, CUDA };
struct Device {
  Device(DeviceType type, DeviceIndex index = -1) : type_(type), index_(index) {}
  DeviceType type_;
  DeviceIndex index_;
};
template <typename T>
class ArrayRef {
 public:
  ArrayRef(const std::initializer_list<T>& list);
  const T* data_ = nullptr;  // (pointer, length), as c10::ArrayRef
  size_t length_ = 0;
};
using IntArrayRef = ArrayRef<int64_t>;
enum class MemoryFormat : int8_t { Contiguous, Preserve };
class DataPtr {
 public:
  DataPtr(DataPtr&&) noexcept;
  ~DataPtr();
  void* get() const;
};
struct Allocator {
  virtual ~Allocator();
  virtual DataPtr allocate(size_t n) = 0;
};
struct TensorOptions {
  TensorOptions dtype(std::optional<ScalarType>) const noexcept { return *this; }
  TensorOptions device(std::optional<Device>) const noexcept { return *this; }
};
}  // namespace c10

namespace at {
using namespace c10;
constexpr auto kByte = ScalarType::Byte;
constexpr auto kInt = ScalarType::Int;
constexpr auto kLong = ScalarType::Long;
constexpr auto kFloat = ScalarType::Float;
constexpr auto kBFloat16 = ScalarType::BFloat16;
class TensorBase {
 public:
  void* impl_ = nullptr;  // as at::TensorBase's one pointer (its TensorImpl)
};
class Tensor : public TensorBase {
 public:
  Tensor() = default;
  explicit Tensor(const TensorBase& base);
  bool is_cuda() const;
  int64_t get_device() const;
  bool is_contiguous(MemoryFormat memory_format = MemoryFormat::Contiguous) const;
  int64_t dim() const;
  int64_t size(int64_t dim) const;
  ScalarType scalar_type() const;
  void* data_ptr() const;
  Device device() const;
  size_t nbytes() const;
  IntArrayRef sizes() const;
};
Tensor empty(IntArrayRef size, TensorOptions options = {}, std::optional<MemoryFormat> memory_format = std::nullopt);
}  // namespace at

namespace pybind11::detail {
template <>
struct type_caster<at::Tensor> {
 public:
  PYBIND11_TYPE_CASTER(at::Tensor, _("torch.Tensor"));
  bool load(handle src, bool);
  static handle cast(const at::Tensor& src, return_value_policy, handle);
};
}  // namespace pybind11::detail
