// FAKE libtorch for python/tests/test_torch_ext_fake.py only (NOT torch; see README.md): the stub declarations of
// include/ implemented over python/tests/fake_torch.py tensors (an at::Tensor's one pointer is the Python tensor;
// tensors made here are never freed), and a fake symmoe._C._ep_capi whose calls go to the Python stand-ins of
// symmoe._C.EpBuffer / EpHandle. Linked with python/src/torch_ext/torch_ep.cpp into a CPU build of
// symmoe._torch_ep, so that its entry points and fast path run on the CPU against the Python fast path.
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include "ep_capi.hpp"
#include <cstdlib>
#include <cstdio>
PyObject* THPVariableClass = Py_None;
PyObject* ParameterClass = Py_None;
static PyObject* g_factory = nullptr;  // factory(shape tuple, dtype name) -> fake tensor (its own allocation)
static PyObject* g_hooks = nullptr;    // view(owner, dtype name), set_offset(t, elements), set_sizes(t, shape)
static PyObject* call(PyObject* o, const char* m) {
  PyObject* r = PyObject_CallMethod(o, m, nullptr);
  if (!r) {
    PyErr_Print();
    std::abort();
  }
  return r;
}
static PyObject* attr(PyObject* o, const char* a) {
  PyObject* r = PyObject_GetAttrString(o, a);
  if (!r) {
    PyErr_Print();
    std::abort();
  }
  return r;
}
static long long as_ll(PyObject* o) {
  long long v = PyLong_AsLongLong(o);
  Py_DECREF(o);
  return v;
}
extern "C" void fake_setup(PyObject* tensor_cls, PyObject* factory, PyObject* hooks) {
  THPVariableClass = tensor_cls;
  g_factory = factory;
  g_hooks = hooks;
  Py_INCREF(tensor_cls);
  Py_INCREF(factory);
  Py_INCREF(hooks);
}
static void hook(const char* name, PyObject* args) {  // g_hooks.name(*args), aborting on an error
  if (!args) {
    PyErr_Print();
    std::abort();
  }
  PyObject* f = attr(g_hooks, name);
  PyObject* r = PyObject_CallObject(f, args);
  Py_DECREF(f);
  Py_DECREF(args);
  if (!r) {
    PyErr_Print();
    std::abort();
  }
  Py_DECREF(r);
}
static PyObject* shape_tuple(c10::IntArrayRef size) {
  PyObject* shape = PyTuple_New(size.length_);
  for (size_t i = 0; i < size.length_; ++i) PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(size.data_[i]));
  return shape;
}
bool THPVariable_CheckExact(PyObject* o) { return (PyObject*)Py_TYPE(o) == THPVariableClass; }
const at::Tensor& THPVariable_Unpack(PyObject* o) {
  auto* t = new at::Tensor();
  t->impl_ = o;
  return *t;
}
static const char* dname(c10::ScalarType t);
namespace c10 {
template <>
ArrayRef<int64_t>::ArrayRef(const std::initializer_list<int64_t>& l) : data_(l.begin()), length_(l.size()) {}
// A TensorImpl* here is the fake tensor (PyObject*) itself.
void TensorImpl::set_storage_offset(int64_t storage_offset) {
  hook("set_offset", Py_BuildValue("(OL)", reinterpret_cast<PyObject*>(this), (long long)storage_offset));
}
void TensorImpl::set_sizes_contiguous(IntArrayRef new_size) {
  hook("set_sizes", Py_BuildValue("(ON)", reinterpret_cast<PyObject*>(this), shape_tuple(new_size)));
}
DataPtr::DataPtr(DataPtr&&) noexcept {}
DataPtr::~DataPtr() {}
void* DataPtr::get() const { return nullptr; }
Allocator::~Allocator() {}
namespace impl {
bool tls_is_dispatch_key_included(DispatchKey) { return false; }
}  // namespace impl
namespace cuda {
cudaStream_t CUDAStream::stream() const { return nullptr; }
CUDAStream getCurrentCUDAStream(DeviceIndex) { return CUDAStream(); }
}  // namespace cuda
}  // namespace c10
namespace at {
#define O static_cast<PyObject*>(impl_)
Tensor::Tensor(const TensorBase& b) { impl_ = b.impl_; }
const Storage& TensorBase::storage() const {
  auto* s = new Storage();  // leaked, as the tensors
  s->owner_ = impl_;
  return *s;
}
TensorImpl* TensorBase::unsafeGetTensorImpl() const { return static_cast<TensorImpl*>(impl_); }
namespace detail {
Tensor make_tensor_over(Storage&& storage, DispatchKeySet key_set, caffe2::TypeMeta data_type) {
  if (key_set.key_ != DispatchKey::CUDA) std::abort();
  PyObject* f = attr(g_hooks, "view");
  PyObject* r = PyObject_CallFunction(f, "Os", static_cast<PyObject*>(storage.owner_), dname(data_type.type_));
  Py_DECREF(f);
  if (!r) {
    PyErr_Print();
    std::abort();
  }
  Tensor t;
  t.impl_ = r;  // leaked: the test's tensors live on
  return t;
}
}  // namespace detail
bool Tensor::is_cuda() const {
  PyObject* v = attr(O, "is_cuda");
  bool r = v == Py_True;
  Py_DECREF(v);
  return r;
}
int64_t Tensor::get_device() const { return as_ll(call(O, "get_device")); }
bool Tensor::is_contiguous(MemoryFormat) const {
  PyObject* v = call(O, "is_contiguous");
  bool r = v == Py_True;
  Py_DECREF(v);
  return r;
}
int64_t Tensor::dim() const {
  PyObject* s = attr(O, "shape");
  int64_t n = PyTuple_GET_SIZE(s);
  Py_DECREF(s);
  return n;
}
int64_t Tensor::size(int64_t d) const {
  PyObject* s = attr(O, "shape");
  int64_t n = PyLong_AsLongLong(PyTuple_GET_ITEM(s, d));
  Py_DECREF(s);
  return n;
}
ScalarType Tensor::scalar_type() const {
  PyObject* d = attr(O, "dtype");
  PyObject* n = attr(d, "name");
  std::string name = PyUnicode_AsUTF8(n);
  Py_DECREF(n);
  Py_DECREF(d);
  if (name == "uint8") return kByte;
  if (name == "int32") return kInt;
  if (name == "int64") return kLong;
  if (name == "float32") return kFloat;
  if (name == "bfloat16") return kBFloat16;
  return ScalarType::Float8_e4m3fn;
}
void* Tensor::data_ptr() const { return reinterpret_cast<void*>(as_ll(call(O, "data_ptr"))); }
Device Tensor::device() const { return Device(DeviceType::CUDA, DeviceIndex(get_device())); }
size_t Tensor::nbytes() const { std::abort(); }
IntArrayRef Tensor::sizes() const { std::abort(); }
}  // namespace at
static const char* dname(c10::ScalarType t) {
  using namespace at;
  switch (t) {
    case kByte:
      return "uint8";
    case kInt:
      return "int32";
    case kLong:
      return "int64";
    case kFloat:
      return "float32";
    case kBFloat16:
      return "bfloat16";
    default:
      return "float8_e4m3fn";
  }
}
namespace at {
static TensorBase make(IntArrayRef size, ScalarType dtype) {
  PyObject* shape = shape_tuple(size);
  PyObject* r = PyObject_CallFunction(g_factory, "Os", shape, dname(dtype));
  Py_DECREF(shape);
  if (!r) {
    PyErr_Print();
    std::abort();
  }
  TensorBase b;
  b.impl_ = r;
  return b;  // leaked: the test's tensors live on
}
Tensor empty(IntArrayRef size, TensorOptions, std::optional<MemoryFormat>) { std::abort(); }
bool Context::deterministicAlgorithms() const { return false; }
Context& globalContext() {
  static Context c;
  return c;
}
namespace detail {
TensorBase empty_cuda(IntArrayRef size, ScalarType dtype, std::optional<Device>, std::optional<c10::MemoryFormat>) {
  return make(size, dtype);
}
}  // namespace detail
namespace cuda {
Allocator* getCUDADeviceAllocator() { std::abort(); }
}  // namespace cuda
}  // namespace at
namespace torch {
void PyWarningHandler::set_in_exception() {}
}  // namespace torch
namespace pybind11::detail {
bool type_caster<at::Tensor>::load(handle, bool) { return false; }
handle type_caster<at::Tensor>::cast(const at::Tensor& t, return_value_policy, handle) {
  PyObject* o = static_cast<PyObject*>(t.impl_);
  Py_INCREF(o);
  return o;
}
}  // namespace pybind11::detail
// ---- a fake symmoe._C._ep_capi over the Python stubs ----
namespace capi = symmoe::ep_capi;
static int get_int(PyObject* o, const char* a, int* out) {
  PyObject* v = PyObject_GetAttrString(o, a);
  if (!v) return -1;
  *out = int(PyLong_AsLong(v));
  Py_DECREF(v);
  return 0;
}
static int handle_info(PyObject* n, capi::HandleInfo* h) {
  int e = 0;
  if (get_int(n, "num_tokens", &h->num_tokens) || get_int(n, "num_topk", &h->num_topk) || get_int(n, "do_expand", &e) ||
      get_int(n, "expert_alignment", &h->expert_alignment) || get_int(n, "num_recv_tokens", &h->num_recv_tokens) ||
      get_int(n, "num_expanded_tokens", &h->num_expanded_tokens))
    return -1;
  h->do_expand = e;
  h->topk_idx = 0x10000000;
  return 0;
}
static int row_capacity(PyObject* b, int expand, int align, int* rows) {
  PyObject* r = PyObject_CallMethod(b, "row_capacity", "Oi", expand ? Py_True : Py_False, align);
  if (!r) return -1;
  *rows = int(PyLong_AsLong(r));
  Py_DECREF(r);
  return 0;
}
static int dispatch_one(PyObject* b, PyObject* n, const capi::DispatchCall* c, int* num_rows, int* cap) {
  PyObject* r = PyObject_CallMethod(
      b, "dispatch_one", "iKKKKKOOiOOiOKKKKi", c->num_tokens, (unsigned long long)c->x, (unsigned long long)c->x_scales,
      (unsigned long long)c->topk_idx, (unsigned long long)c->topk_weights, (unsigned long long)c->stream, n,
      c->expand ? Py_True : Py_False, c->expert_alignment, c->zero_padding ? Py_True : Py_False,
      c->cached ? Py_True : Py_False, c->num_sms, c->cpu_sync ? Py_True : Py_False, (unsigned long long)c->recv_x_out,
      (unsigned long long)c->recv_scales_out, (unsigned long long)c->recv_topk_idx_out,
      (unsigned long long)c->recv_topk_weights_out, c->out_rows);
  if (!r) return -1;
  *num_rows = int(PyLong_AsLong(PyTuple_GET_ITEM(r, 4)));
  *cap = int(PyLong_AsLong(PyTuple_GET_ITEM(r, 5)));
  Py_DECREF(r);
  return 0;
}
static int combine_one(PyObject* b, PyObject* n, const capi::CombineCall* c) {
  PyObject* r = PyObject_CallMethod(
      b, "combine_one", "KKKKKOOiOKK", (unsigned long long)c->x, (unsigned long long)c->topk_weights,
      (unsigned long long)c->bias_0, (unsigned long long)c->bias_1, (unsigned long long)c->stream, n,
      c->reduce_local_experts ? Py_True : Py_False, c->num_sms, c->cpu_sync ? Py_True : Py_False,
      (unsigned long long)c->combined_x_out, (unsigned long long)c->combined_topk_weights_out);
  if (!r) return -1;
  Py_DECREF(r);
  return 0;
}
static const capi::EpCApi kFake{capi::kEpCApiVersion, sizeof(capi::EpCApi), handle_info,
                                row_capacity,         dispatch_one,         combine_one};
extern "C" PyObject* fake_capi() {
  return PyCapsule_New(const_cast<capi::EpCApi*>(&kFake), capi::kEpCApiName, nullptr);
}
