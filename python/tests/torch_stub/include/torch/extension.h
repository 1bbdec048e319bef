// STUB for the syntax check of python/src/torch_ext/torch_ep.cpp only (see ../../README.md): not libtorch.
#pragma once
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>

namespace c10 {
using DeviceIndex = int8_t;
enum class ScalarType : int8_t { Byte, Int, Long, Float, BFloat16, Float8_e4m3fn };
enum class DeviceType : int8_t { CPU, CUDA };
inline size_t elementSize(ScalarType t) {
  if (t == ScalarType::Long) return 8;
  if (t == ScalarType::Int || t == ScalarType::Float) return 4;
  return t == ScalarType::BFloat16 ? 2 : 1;
}
class DispatchKeySet {
 public:
  constexpr explicit DispatchKeySet(DispatchKey k) : key_(k) {}
  DispatchKey key_;
};
struct Device {
  Device(DeviceType type, DeviceIndex index = -1) : type_(type), index_(index) {}
  DeviceType type_;
  DeviceIndex index_;
};
template <typename T>
class ArrayRef {
 public:
  ArrayRef(const std::initializer_list<T>& list);
  ArrayRef(const T* data, size_t length) : data_(data), length_(length) {}
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
// c10::Storage (a StorageImpl pointer there; the Python tensor whose allocation it is in the fake)
class Storage {
 public:
  void* owner_ = nullptr;
};
class TensorImpl {
 public:
  void set_storage_offset(int64_t storage_offset);
  void set_sizes_contiguous(IntArrayRef new_size);
};
struct TensorOptions {
  TensorOptions dtype(std::optional<ScalarType>) const noexcept { return *this; }
  TensorOptions device(std::optional<Device>) const noexcept { return *this; }
};
}  // namespace c10
namespace caffe2 {
struct TypeMeta {
  c10::ScalarType type_;
};
}  // namespace caffe2
namespace c10 {
inline caffe2::TypeMeta scalarTypeToTypeMeta(ScalarType t) { return caffe2::TypeMeta{t}; }
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
  const Storage& storage() const;
  TensorImpl* unsafeGetTensorImpl() const;
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
namespace detail {
Tensor make_tensor_over(Storage&& storage, DispatchKeySet key_set, caffe2::TypeMeta data_type);  // stub only
// as ATen's: a Tensor over a new T(args...) (the fake has only the TensorImpl(storage, key_set, dtype) one)
template <typename T, typename... Args>
Tensor make_tensor(Args&&... args) {
  return make_tensor_over(std::forward<Args>(args)...);
}
}  // namespace detail
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
