// DLPack on the C++ side: read a capsule's descriptor (symmoe.dlpack builds TensorInfo from it) and make capsules
// that view memory owned by a Python object (EpBuffer outputs, handle metadata) without copying.
// NOTES: reading does not consume the capsule (its name stays "dltensor"), so the producer's capsule destructor
// frees the descriptor; the caller keeps the producing tensor alive while the pointer is used.
#include "bindings.hpp"
#include "dlpack_abi.hpp"

namespace symmoe::py_bind {
namespace {

// dtype names shared with python/symmoe/dlpack.py.
struct DtypeEntry {
  const char* name;
  uint8_t code, bits;
};
constexpr DtypeEntry kDtypes[] = {
    {"bool", dlpack::kBool, 8},
    {"int8", dlpack::kInt, 8},
    {"int16", dlpack::kInt, 16},
    {"int32", dlpack::kInt, 32},
    {"int64", dlpack::kInt, 64},
    {"uint8", dlpack::kUInt, 8},
    {"uint16", dlpack::kUInt, 16},
    {"uint32", dlpack::kUInt, 32},
    {"uint64", dlpack::kUInt, 64},
    {"float16", dlpack::kFloat, 16},
    {"float32", dlpack::kFloat, 32},
    {"float64", dlpack::kFloat, 64},
    {"bfloat16", dlpack::kBfloat, 16},
    {"float8_e4m3fn", dlpack::kFloat8E4m3fn, 8},
    {"float8_e5m2", dlpack::kFloat8E5m2, 8},
    {"float8_e8m0fnu", dlpack::kFloat8E8m0fnu, 8},
};

std::string dtype_name(const dlpack::DataType& t) {
  if (t.lanes == 1)
    for (const auto& e : kDtypes)
      if (e.code == t.code && e.bits == t.bits) return e.name;
  return detail::concat("unsupported(code=", int(t.code), ",bits=", int(t.bits), ",lanes=", t.lanes, ")");
}

const DtypeEntry& dtype_entry(const std::string& name) {
  for (const auto& e : kDtypes)
    if (name == e.name) return e;
  SYMMOE_FAIL("python", "unknown dtype '", name, "'");
}

// A capsule's ManagedTensor plus the storage it points into (shape, strides) and the owner it keeps alive.
struct ViewContext {
  dlpack::ManagedTensor managed{};
  std::vector<int64_t> shape, strides;  // strides empty: C-contiguous
  PyObject* owner = nullptr;            // strong reference, released (with the GIL) by the deleter
};

void delete_view(dlpack::ManagedTensor* self) {
  auto* ctx = static_cast<ViewContext*>(self->manager_ctx);
  if (ctx->owner && Py_IsInitialized()) {  // a consumer may free its tensor during interpreter shutdown
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(ctx->owner);
    PyGILState_Release(g);
  }
  delete ctx;
}

// Capsule destructor: frees the view unless a consumer took it (renamed the capsule).
void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, dlpack::kCapsuleName)) {
    auto* m = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule, dlpack::kCapsuleName));
    if (m && m->deleter) m->deleter(m);
  }
}

}  // namespace

void bind_dlpack(py::module_& m) {
  m.def(
      "dlpack_describe",
      [](const py::capsule& capsule) {
        SYMMOE_CHECK(PyCapsule_IsValid(capsule.ptr(), dlpack::kCapsuleName), "python",
                     "expected an unconsumed DLPack capsule named 'dltensor' (got one named '",
                     PyCapsule_GetName(capsule.ptr()) ? PyCapsule_GetName(capsule.ptr()) : "", "')");
        const auto* mt =
            static_cast<const dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), dlpack::kCapsuleName));
        const dlpack::Tensor& t = mt->dl_tensor;
        py::tuple shape(t.ndim), strides(t.ndim);
        int64_t expected = 1;
        for (int i = t.ndim - 1; i >= 0; --i) {  // null strides mean C-contiguous
          shape[i] = t.shape[i];
          strides[i] = t.strides ? t.strides[i] : expected;
          expected *= t.shape[i];
        }
        const uintptr_t data = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
        return py::make_tuple(py::int_(data), shape, strides, dtype_name(t.dtype), t.device.device_type,
                              t.device.device_id);
      },
      py::arg("capsule"), "(data_ptr, shape, strides in elements, dtype name, device_type, device_id)");

  m.def(
      "dlpack_make_capsule",
      [](uintptr_t data_ptr, const std::vector<int64_t>& shape, const std::string& dtype, int device_type,
         int device_id, py::object owner, const std::vector<int64_t>& strides) {
        const DtypeEntry& e = dtype_entry(dtype);
        SYMMOE_CHECK(strides.empty() || strides.size() == shape.size(), "python",
                     "dlpack_make_capsule: ", strides.size(), " strides for ", shape.size(), " dimensions");
        auto* ctx = new ViewContext;
        ctx->shape = shape;
        ctx->strides = strides;
        ctx->owner = owner.is_none() ? nullptr : owner.inc_ref().ptr();
        dlpack::Tensor& t = ctx->managed.dl_tensor;
        t.data = reinterpret_cast<void*>(data_ptr);
        t.device = {device_type, device_id};
        t.ndim = int32_t(shape.size());
        t.dtype = {e.code, e.bits, 1};
        t.shape = ctx->shape.data();
        t.strides = ctx->strides.empty() ? nullptr : ctx->strides.data();  // null: C-contiguous
        t.byte_offset = 0;
        ctx->managed.manager_ctx = ctx;
        ctx->managed.deleter = delete_view;
        PyObject* capsule = PyCapsule_New(&ctx->managed, dlpack::kCapsuleName, capsule_destructor);
        if (!capsule) {
          delete_view(&ctx->managed);
          throw py::error_already_set();
        }
        return py::reinterpret_steal<py::object>(capsule);
      },
      py::arg("data_ptr"), py::arg("shape"), py::arg("dtype"), py::arg("device_type"), py::arg("device_id"),
      py::arg("owner") = py::none(), py::arg("strides") = std::vector<int64_t>{},
      "a 'dltensor' capsule viewing data_ptr (strides in elements; empty: C-contiguous); `owner` stays alive until "
      "the capsule's consumer is done");
}

}  // namespace symmoe::py_bind
