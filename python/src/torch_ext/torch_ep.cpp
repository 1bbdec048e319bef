// symmoe._torch_ep: the eager fast path of ElasticBuffer.dispatch / combine (python/symmoe/_ep_eager.py) in C++
// over libtorch, so that an eager pair costs the C++ call plus a few microseconds: the checks read the tensors
// directly, the outputs are at::empty (torch's caching allocator, on the current stream of the rank's GPU, as
// torch.empty), and the call goes to symmoe._C through its C interface (python/src/ep_capi.hpp).
// Optional: python/tests_gpu/build_torch_ext.sh builds it where torch is installed; symmoe._ep_eager uses it when
// it imports and falls back to its own Python otherwise.
// Contract: dispatch() and combine() are _ep_eager.dispatch / combine: the same arguments (the buffer's EpState
// first), outputs, EPHandle record, EventOverlap, stream order (EpState.last_stream) and native handle pool, or None
// whenever the Python version returns None or the case is one it leaves to the general path (tensor subclasses
// included): symmoe.ep then makes the call and words any error. Errors of the call itself are those of symmoe._C
// (ep_capi.hpp); torch's (an allocation that fails) are torch's Python exceptions.
// The state and the handle are the records of python/symmoe/_ep_types.py (EpState, EPHandle), the one definition
// the three paths share: init() takes that module, resolves every field used here (kStateFields, kHandleFields) to
// its __slots__ member and refuses a module whose classes lack one, and takes the payload key of bf16, the largest
// expert alignment, the scale-format table (per EpState) and the framework marker from it, not from copies here.
// NOTES: host cost. A record field is one load at a fixed offset (no attribute lookup); dispatch and combine are
// METH_FASTCALL functions (no pybind11 argument dispatch); outputs come from at::detail::empty_cuda (torch.empty's
// CUDA kernel without the dispatcher) whenever torch.empty would do nothing more (see new_empty).
#include <ATen/Context.h>
#include <ATen/cuda/EmptyTensor.h>
#include <Python.h>
#include <structmember.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/extension.h>

#include <cstdint>
#include <string>

#include "ep_capi.hpp"

#ifndef TORCH_EXTENSION_NAME
#define TORCH_EXTENSION_NAME _torch_ep
#endif

namespace {
namespace py = pybind11;
namespace capi = symmoe::ep_capi;

constexpr uintptr_t kCudaStreamLegacy = 1;  // cudaStreamLegacy: what symmoe passes for torch's default stream

// The record fields used here, by their names in symmoe._ep_types (python/tests/test_ep_records.py checks these
// lists against the classes' __slots__ on the CPU).
enum StateField {
  kDevice,
  kHidden,
  kMaxTokens,
  kNumTopk,
  kNumExperts,
  kAllowMultipleReduction,
  kNatives,
  kScaleFormats,
  kLastStream,
  kNumStateFields
};
constexpr const char* kStateFields[kNumStateFields] = {"device",   "hidden",        "num_max_tokens_per_rank",
                                                       "num_topk", "num_experts",   "allow_multiple_reduction",
                                                       "natives",  "scale_formats", "last_stream"};
enum HandleField {
  kOwner,
  kNative,
  kPayload,
  kRowCapacity,
  kNumSms,
  kLike,
  kFilled,
  kSharedTopkIdx,
  kRouting,
  kTopkIdxPtr,
  kNumHandleFields
};
constexpr const char* kHandleFields[kNumHandleFields] = {"owner",   "native",      "payload", "row_capacity",
                                                         "num_sms", "like",        "filled",  "shared_topk_idx",
                                                         "routing", "topk_idx_ptr"};

// Set once by init() and kept for the life of the process (strong references, never released: the module cannot
// be unloaded, and releasing them at exit could run after the interpreter is gone).
struct Globals {
  const capi::EpCApi* api = nullptr;
  PyTypeObject* state_type = nullptr;   // symmoe._ep_types.EpState
  PyTypeObject* handle_type = nullptr;  // symmoe._ep_types.EPHandle
  PyObject* event_cls = nullptr;        // symmoe._ep_types.EventOverlap
  PyObject* marker_fn = nullptr;        // symmoe._ep_types.framework_marker
  PyObject* marker = nullptr;           // what it returns for a torch tensor (one object for the process)
  PyObject* empty_tuple = nullptr;
  PyObject* key_bf16 = nullptr;      // _ep_types.BF16_PAYLOAD
  int64_t max_expert_alignment = 0;  // _ep_types.MAX_EXPERT_ALIGNMENT
  PyObject* name_float32 = nullptr;  // the scales dtypes of EpState.scale_formats' keys
  PyObject* name_int32 = nullptr;
  PyObject* take_native_handle = nullptr;  // method names of EpState (interned)
  PyObject* give_back_native_handle = nullptr;
  Py_ssize_t state_offsets[kNumStateFields] = {};
  Py_ssize_t handle_offsets[kNumHandleFields] = {};
};
Globals g;

[[noreturn]] void throw_python() { throw py::error_already_set(); }

// New reference to o.name (throws the Python error).
py::object get(PyObject* o, PyObject* name) {
  PyObject* r = PyObject_GetAttr(o, name);
  if (!r) throw_python();
  return py::reinterpret_steal<py::object>(r);
}
void set(PyObject* o, PyObject* name, PyObject* value) {
  if (PyObject_SetAttr(o, name, value) < 0) throw_python();
}
bool truthy(PyObject* o) {
  const int r = PyObject_IsTrue(o);
  if (r < 0) throw_python();
  return r != 0;
}
// An exact Python int (not bool, as `type(v) is int`) in the range of int64_t, else false.
bool exact_int(PyObject* o, int64_t* out) {
  if (!PyLong_CheckExact(o)) return false;
  int overflow = 0;
  const int64_t v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow != 0) return false;
  if (v == -1 && PyErr_Occurred()) throw_python();
  *out = v;
  return true;
}
py::object new_int(int64_t v) {
  PyObject* r = PyLong_FromLongLong(v);
  if (!r) throw_python();
  return py::reinterpret_steal<py::object>(r);
}
py::object new_stream_int(uintptr_t v) {
  PyObject* r = PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(v));
  if (!r) throw_python();
  return py::reinterpret_steal<py::object>(r);
}
// `cls.__new__(cls)` of a class without its own __new__ (object.__new__): an instance without __init__.
py::object bare_instance(PyObject* cls) {
  PyTypeObject* type = reinterpret_cast<PyTypeObject*>(cls);
  PyObject* r = type->tp_new(type, g.empty_tuple, nullptr);
  if (!r) throw_python();
  return py::reinterpret_steal<py::object>(r);
}

// The at::Tensor of a torch.Tensor (or Parameter) object; null for anything else, tensor subclasses included.
const at::Tensor* as_tensor(PyObject* o) { return THPVariable_CheckExact(o) ? &THPVariable_Unpack(o) : nullptr; }
// is_cuda, on this rank's device, contiguous (the _ep_eager checks of every input tensor).
bool on_rank(const at::Tensor& t, int64_t device) {
  return t.is_cuda() && t.get_device() == device && t.is_contiguous();
}
bool shape_is(const at::Tensor& t, int64_t rows, int64_t cols) {
  return t.dim() == 2 && t.size(0) == rows && t.size(1) == cols;
}
uintptr_t address(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); }

// The stream handle _checks.caller_stream gives for a torch tensor: torch's current stream of `device`, with the
// default stream (handle 0) passed as cudaStreamLegacy.
uintptr_t current_stream(int64_t device) {
  const cudaStream_t s = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
  return s ? reinterpret_cast<uintptr_t>(s) : kCudaStreamLegacy;
}
// Record fields: a borrowed reference (null while the slot is unset) and a store that keeps the reference counts.
PyObject*& slot(PyObject* o, Py_ssize_t offset) {
  return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + offset);
}
PyObject* field(PyObject* state, StateField f) { return slot(state, g.state_offsets[f]); }
PyObject* field(PyObject* handle, HandleField f) { return slot(handle, g.handle_offsets[f]); }
void store(PyObject* o, Py_ssize_t offset, PyObject* value) {
  PyObject*& s = slot(o, offset);
  PyObject* old = s;
  Py_INCREF(value);
  s = value;
  Py_XDECREF(old);
}
void store(PyObject* handle, HandleField f, PyObject* value) { store(handle, g.handle_offsets[f], value); }
void store(PyObject* state, StateField f, PyObject* value) { store(state, g.state_offsets[f], value); }
// A record field as an exact int, false when it is not one (None, or an unset field: null, included).
bool int_of(PyObject* value, int64_t* out) { return value && exact_int(value, out); }
bool is_true(PyObject* value) { return value && truthy(value); }

// Whether state.last_stream lets a call on `stream` go without ordering (None, or the same stream).
bool same_stream_as_last(PyObject* state, uintptr_t stream) {
  PyObject* last = field(state, kLastStream);
  if (!last) return false;
  if (last == Py_None) return true;
  if (!PyLong_Check(last)) return false;
  const unsigned long long v = PyLong_AsUnsignedLongLong(last);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return v == static_cast<unsigned long long>(stream);
}
// state.natives.get(key) (borrowed), null when absent or when natives is not a dict.
PyObject* native_buffer(PyObject* state, PyObject* key) {
  PyObject* natives = field(state, kNatives);
  if (!natives || !PyDict_Check(natives) || !key) return nullptr;
  PyObject* impl = PyDict_GetItemWithError(natives, key);
  if (!impl && PyErr_Occurred()) throw_python();
  return impl;
}

// torch.empty(shape, dtype=dtype, device=device): torch's caching allocator, on the current stream of `device`.
// at::detail::empty_cuda is what torch.empty's CUDA kernel calls; the dispatcher adds nothing to it but a
// deterministic fill (torch.use_deterministic_algorithms) and what a Python dispatch mode (TorchDispatchMode,
// FakeTensorMode) does instead: in those cases the call goes through at::empty.
bool direct_empty() {
  return !at::globalContext().deterministicAlgorithms() &&
         !c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::Python);
}
at::Tensor new_empty(at::IntArrayRef shape, at::ScalarType dtype, const at::Device& device, bool direct) {
  if (direct) return at::Tensor(at::detail::empty_cuda(shape, dtype, device, at::MemoryFormat::Contiguous));
  return at::empty(shape, at::TensorOptions().dtype(dtype).device(device));
}

// The marker _ep_types.framework_marker returns for torch tensors (made on first use, as the Python path does).
PyObject* marker(PyObject* x) {
  if (!g.marker) {
    PyObject* m = PyObject_CallOneArg(g.marker_fn, x);
    if (!m) throw_python();
    g.marker = m;
  }
  return g.marker;
}

struct HandleInfo {
  capi::HandleInfo h;
  int64_t known;  // rows known from a CPU sync (-1: unknown), as _ep_eager._routing
};
HandleInfo handle_info(PyObject* native) {
  HandleInfo r{};
  if (g.api->handle_info(native, &r.h) != 0) throw_python();
  r.known = r.h.do_expand ? r.h.num_expanded_tokens : r.h.num_recv_tokens;
  return r;
}
// An EPHandle of this state, filled, not sharing the caller's topk_idx (what both fast paths require).
bool usable_handle(PyObject* handle, PyObject* state) {
  if (!PyObject_TypeCheck(handle, g.handle_type)) return false;
  if (field(handle, kOwner) != state || !is_true(field(handle, kFilled))) return false;
  return field(handle, kSharedTopkIdx) == Py_None && field(handle, kNative) != nullptr;
}

py::object dispatch_impl(PyObject* state, PyObject* x_obj, PyObject* idx_obj, PyObject* w_obj, PyObject* alignment_obj,
                         PyObject* num_sms_obj, PyObject* do_expand_obj, PyObject* zero_padding_obj,
                         PyObject* handle_copy_obj, PyObject* handle) {
  const py::object none = py::none();
  if (!PyObject_TypeCheck(state, g.state_type)) return none;
  int64_t dev = 0, H = 0, T_max = 0, state_topk = 0, num_experts = 0;
  if (!int_of(field(state, kDevice), &dev) || !int_of(field(state, kHidden), &H)) return none;
  // payload: bf16 x, or an (x, sf) pair of float8_e4m3fn / uint8 x and scales that EpState.scale_formats knows
  PyObject* sf_obj = nullptr;
  PyObject* key = g.key_bf16;
  py::object fp8_key;
  if (PyTuple_CheckExact(x_obj)) {
    if (PyTuple_GET_SIZE(x_obj) != 2) return none;
    sf_obj = PyTuple_GET_ITEM(x_obj, 1);
    x_obj = PyTuple_GET_ITEM(x_obj, 0);
  }
  const at::Tensor* x = as_tensor(x_obj);
  const at::Tensor* sf = sf_obj ? as_tensor(sf_obj) : nullptr;
  if (!x || (sf_obj && !sf)) return none;
  int64_t sf_cols = 0;
  if (sf) {
    if (!on_rank(*sf, dev) || sf->dim() != 2) return none;
    sf_cols = sf->size(1);
    PyObject* sf_dtype = sf->scalar_type() == at::kFloat ? g.name_float32
                         : sf->scalar_type() == at::kInt ? g.name_int32
                                                         : nullptr;
    PyObject* formats = field(state, kScaleFormats);
    if (!sf_dtype || !formats || !PyDict_Check(formats)) return none;
    const py::object cols = new_int(sf_cols);
    const py::object lookup = py::reinterpret_steal<py::object>(PyTuple_Pack(2, sf_dtype, cols.ptr()));
    if (!lookup) throw_python();
    PyObject* found = PyDict_GetItemWithError(formats, lookup.ptr());  // borrowed
    if (!found) {
      if (PyErr_Occurred()) throw_python();
      return none;
    }
    fp8_key = py::reinterpret_borrow<py::object>(found);
    key = fp8_key.ptr();
    if (x->scalar_type() != at::ScalarType::Float8_e4m3fn && x->scalar_type() != at::kByte) return none;
  } else if (x->scalar_type() != at::kBFloat16) {
    return none;
  }
  const at::Tensor* w = as_tensor(w_obj);
  if (!w || !on_rank(*x, dev) || !on_rank(*w, dev)) return none;
  if (x->dim() != 2 || x->size(1) != H) return none;
  const int64_t T = x->size(0);

  const bool cached = handle != Py_None;
  if (!int_of(field(state, kNumTopk), &state_topk)) return none;
  int64_t K = 0, alignment = 1;
  bool expand = false;
  uintptr_t idx_ptr = 0;
  if (cached) {  // the handle's routing, expand mode and alignment
    if (idx_obj != Py_None || !usable_handle(handle, state)) return none;
    const HandleInfo info = handle_info(field(handle, kNative));
    if (info.known >= 0 || info.h.num_tokens != T) return none;  // rows known: the general path copies exactly those
    if (alignment_obj != Py_None) {
      int64_t a = 0;
      if (!exact_int(alignment_obj, &a) || a != info.h.expert_alignment) return none;
    }
    K = info.h.num_topk, expand = info.h.do_expand != 0, alignment = info.h.expert_alignment;
    idx_ptr = info.h.topk_idx;
  } else {
    K = state_topk, expand = truthy(do_expand_obj);
    const at::Tensor* idx = as_tensor(idx_obj);
    if (!idx || !on_rank(*idx, dev) || idx->scalar_type() != at::kLong || !shape_is(*idx, T, K)) return none;
    if (alignment_obj != Py_None &&
        (!exact_int(alignment_obj, &alignment) || alignment < 1 || alignment > g.max_expert_alignment)) {
      return none;
    }
    idx_ptr = address(*idx);
  }
  if (!int_of(field(state, kMaxTokens), &T_max)) return none;
  if (T > T_max || K == 0 || (sf && sf->size(0) != T) || w->scalar_type() != at::kFloat || !shape_is(*w, T, K)) {
    return none;
  }
  int64_t num_sms = 0;
  if (!exact_int(num_sms_obj, &num_sms) || num_sms < 0 || num_sms > INT32_MAX) return none;
  if (!int_of(field(state, kNumExperts), &num_experts) || state_topk == 0) return none;
  PyObject* impl = native_buffer(state, key);  // borrowed
  if (!impl) return none;                      // the general path allocates the payload's buffer
  const py::object impl_ref = py::reinterpret_borrow<py::object>(impl);
  const uintptr_t stream = current_stream(dev);
  if (!same_stream_as_last(state, stream)) return none;  // ordered after another stream (or graph capture)
  int capacity = 0;
  if (g.api->row_capacity(impl, expand, int(alignment), &capacity) != 0) throw_python();
  PyObject* mark = marker(x_obj);

  const at::Device device = x->device();
  const bool direct = direct_empty();
  const int64_t rows = capacity;
  const py::object stream_int = new_stream_int(stream);
  py::object native;
  at::Tensor recv_x, recv_sf, recv_idx, recv_w;
  int num_rows = 0, row_capacity = 0;
  try {
    if (cached) store(handle, kLike, mark);
    // _ep_types.new_dispatch_outputs' shapes and dtypes
    recv_x = new_empty({rows, H}, x->scalar_type(), device, direct);
    if (sf) recv_sf = new_empty({rows, sf_cols}, sf->scalar_type(), device, direct);
    if (!expand) recv_idx = new_empty({rows, K}, at::kLong, device, direct);
    recv_w = expand ? new_empty({rows}, at::kFloat, device, direct) : new_empty({rows, K}, at::kFloat, device, direct);
    if (cached) {
      native = py::reinterpret_borrow<py::object>(field(handle, kNative));
    } else {
      PyObject* taken = PyObject_CallMethodNoArgs(state, g.take_native_handle);
      if (!taken) throw_python();
      native = py::reinterpret_steal<py::object>(taken);
    }
    capi::DispatchCall c{};
    c.num_tokens = int(T), c.x = address(*x), c.x_scales = sf ? address(*sf) : 0, c.topk_idx = idx_ptr;
    c.topk_weights = address(*w), c.stream = stream, c.expand = expand, c.expert_alignment = int(alignment);
    c.zero_padding = truthy(zero_padding_obj), c.cached = cached, c.num_sms = int(num_sms), c.cpu_sync = 0;
    c.recv_x_out = address(recv_x), c.recv_scales_out = sf ? address(recv_sf) : 0;
    c.recv_topk_idx_out = expand ? 0 : address(recv_idx), c.recv_topk_weights_out = address(recv_w);
    c.out_rows = capacity;
    if (g.api->dispatch_one(impl, native.ptr(), &c, &num_rows, &row_capacity) != 0) throw_python();
  } catch (...) {
    // As _ep_eager: the stream order is kept and a fresh native handle goes back to the pool. No Python error is
    // pending here (py::error_already_set holds its own); an error of this clean-up is dropped for the first one.
    store(state, kLastStream, stream_int.ptr());
    if (native && !cached) {
      Py_XDECREF(PyObject_CallMethodOneArg(state, g.give_back_native_handle, native.ptr()));
    }
    PyErr_Clear();
    throw;
  }
  store(state, kLastStream, stream_int.ptr());
  const py::object rows_int = new_int(row_capacity);
  py::object out_handle;
  if (cached) {  // a cached dispatch without CPU sync leaves the handle's counts (and its routing) as they were
    store(handle, kRowCapacity, rows_int.ptr());
    out_handle = py::reinterpret_borrow<py::object>(handle);
  } else {  // EPHandle.of_dispatch: every record field
    out_handle = bare_instance(reinterpret_cast<PyObject*>(g.handle_type));
    PyObject* h = out_handle.ptr();
    const py::tuple routing = py::make_tuple(T, K, expand, -1, alignment);
    store(h, kOwner, state), store(h, kNative, native.ptr()), store(h, kPayload, key);
    store(h, kRowCapacity, rows_int.ptr()), store(h, kNumSms, num_sms_obj), store(h, kLike, mark);
    store(h, kFilled, Py_True), store(h, kSharedTopkIdx, truthy(handle_copy_obj) ? Py_None : idx_obj);
    store(h, kRouting, routing.ptr()), store(h, kTopkIdxPtr, Py_None);
  }
  py::object recv = sf ? py::object(py::make_tuple(recv_x, recv_sf)) : py::cast(recv_x);
  return py::make_tuple(recv, expand ? none : py::cast(recv_idx), recv_w, out_handle, bare_instance(g.event_cls));
}

py::object combine_impl(PyObject* state, PyObject* x_obj, PyObject* handle, PyObject* w_obj, PyObject* num_sms_obj,
                        PyObject* cpu_sync_obj) {
  const py::object none = py::none();
  if (!PyObject_TypeCheck(state, g.state_type)) return none;
  const at::Tensor* x = as_tensor(x_obj);
  if (!x || !usable_handle(handle, state)) return none;
  PyObject* native = field(handle, kNative);
  const py::object native_ref = py::reinterpret_borrow<py::object>(native);
  const HandleInfo info = handle_info(native);
  const int64_t T = info.h.num_tokens, K = info.h.num_topk;
  const bool expand = info.h.do_expand != 0;
  int64_t dev = 0, H = 0, capacity = 0;
  if (!int_of(field(state, kDevice), &dev) || !int_of(field(state, kHidden), &H)) return none;
  if (!on_rank(*x, dev) || x->scalar_type() != at::kBFloat16 || x->dim() != 2 || x->size(1) != H) return none;
  const int64_t rows = x->size(0);
  if (!int_of(field(handle, kRowCapacity), &capacity)) return none;
  if (rows > capacity || (info.known >= 0 && rows < info.known)) return none;
  uintptr_t w_ptr = 0;
  const at::Tensor* w = nullptr;
  if (w_obj != Py_None) {
    w = as_tensor(w_obj);
    if (!w || !on_rank(*w, dev) || w->scalar_type() != at::kFloat) return none;
    if (expand ? (w->dim() != 1 || w->size(0) != rows) : !shape_is(*w, rows, K)) return none;
    w_ptr = address(*w);
  }
  int64_t num_sms = 0, handle_sms = 0;
  if (!exact_int(num_sms_obj, &num_sms) || num_sms < 0 || num_sms > INT32_MAX) return none;
  if (num_sms == 0 && (!int_of(field(handle, kNumSms), &handle_sms) || handle_sms < 0 || handle_sms > INT32_MAX)) {
    return none;
  }
  PyObject* impl = native_buffer(state, field(handle, kPayload));  // borrowed
  if (!impl) return none;
  const py::object impl_ref = py::reinterpret_borrow<py::object>(impl);
  const uintptr_t stream = current_stream(dev);
  if (!same_stream_as_last(state, stream)) return none;
  const bool reduce = expand && is_true(field(state, kAllowMultipleReduction));
  const bool cpu_sync = truthy(cpu_sync_obj);

  const at::Device device = x->device();
  const bool direct = direct_empty();
  const py::object stream_int = new_stream_int(stream);
  at::Tensor combined_x, combined_w;
  try {
    combined_x = new_empty({T, H}, at::kBFloat16, device, direct);
    if (w) combined_w = new_empty({T, K}, at::kFloat, device, direct);
    capi::CombineCall c{};
    c.x = address(*x), c.topk_weights = w_ptr, c.stream = stream, c.reduce_local_experts = reduce;
    c.num_sms = int(num_sms ? num_sms : handle_sms), c.cpu_sync = cpu_sync;
    c.combined_x_out = address(combined_x), c.combined_topk_weights_out = w ? address(combined_w) : 0;
    if (g.api->combine_one(impl, native, &c) != 0) throw_python();
  } catch (...) {
    store(state, kLastStream, stream_int.ptr());
    PyErr_Clear();
    throw;
  }
  store(state, kLastStream, stream_int.ptr());
  return py::make_tuple(combined_x, w ? py::cast(combined_w) : none, bare_instance(g.event_cls));
}

// torch's own error translation (c10 errors as RuntimeError, out-of-memory as torch.OutOfMemoryError, pending
// Python errors as they are), where this torch has the macros; pybind11's otherwise.
#if defined(HANDLE_TH_ERRORS) && defined(END_HANDLE_TH_ERRORS_PYBIND)
#define SYMMOE_TORCH_ERRORS_BEGIN HANDLE_TH_ERRORS
#define SYMMOE_TORCH_ERRORS_END END_HANDLE_TH_ERRORS_PYBIND
#else
#define SYMMOE_TORCH_ERRORS_BEGIN {
#define SYMMOE_TORCH_ERRORS_END }
#endif

py::object dispatch(PyObject* const* a) {
  SYMMOE_TORCH_ERRORS_BEGIN
  if (!g.api) throw std::runtime_error("symmoe._torch_ep: init() has not been called");
  return dispatch_impl(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]);
  SYMMOE_TORCH_ERRORS_END
}

py::object combine(PyObject* const* a) {
  SYMMOE_TORCH_ERRORS_BEGIN
  if (!g.api) throw std::runtime_error("symmoe._torch_ep: init() has not been called");
  return combine_impl(a[0], a[1], a[2], a[3], a[4], a[5]);
  SYMMOE_TORCH_ERRORS_END
}

// dispatch / combine as METH_FASTCALL functions (positional arguments only, as _ep_eager calls them): the Python
// error as pybind11 would set it (torch's errors are already Python errors here, see SYMMOE_TORCH_ERRORS_END).
template <py::object (*Fn)(PyObject* const*), Py_ssize_t N>
PyObject* fastcall(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != N) {
    PyErr_Format(PyExc_TypeError, "symmoe._torch_ep: expected %zd positional arguments, got %zd", N, nargs);
    return nullptr;
  }
  try {
    return Fn(args).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}
PyMethodDef kFastDefs[] = {
    {"dispatch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fastcall<&dispatch, 10>)), METH_FASTCALL,
     "_ep_eager.dispatch(state, x, topk_idx, topk_weights, expert_alignment, num_sms, do_expand, do_zero_padding, "
     "do_handle_copy, handle) in C++ (positional arguments)"},
    {"combine", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fastcall<&combine, 6>)), METH_FASTCALL,
     "_ep_eager.combine(state, x, handle, topk_weights, num_sms, do_cpu_sync) in C++ (positional arguments)"},
};

PyObject* intern(const char* s) {
  PyObject* r = PyUnicode_InternFromString(s);
  if (!r) throw_python();
  return r;
}
// module.name (a new reference); TypeError naming what symmoe._ep_types lacks.
py::object module_attr(py::handle module, const char* name) {
  if (!py::hasattr(module, name)) {
    throw py::type_error(std::string("symmoe._torch_ep.init: symmoe._ep_types has no ") + name);
  }
  return module.attr(name);
}

// The offset of `cls`'s __slots__ field `name` in its instances; TypeError when the class has no such writable
// object slot (a renamed or removed field of the records of symmoe._ep_types).
Py_ssize_t slot_offset(PyObject* cls, const char* name) {
  PyObject* d = PyObject_GetAttrString(cls, name);
  if (!d) PyErr_Clear();
  const py::object descr = py::reinterpret_steal<py::object>(d);
  const PyMemberDef* m =
      d && Py_IS_TYPE(d, &PyMemberDescr_Type) ? reinterpret_cast<PyMemberDescrObject*>(d)->d_member : nullptr;
  if (!m || m->type != T_OBJECT_EX || (m->flags & READONLY)) {
    throw py::type_error(
        std::string("symmoe._torch_ep.init: ") + reinterpret_cast<PyTypeObject*>(cls)->tp_name + "." + name +
        " is not a writable __slots__ field (symmoe._ep_types and " +
        "python/src/torch_ext/torch_ep.cpp disagree: rebuild with python/tests_gpu/build_torch_ext.sh)");
  }
  return m->offset;
}

void init(py::capsule api, py::module_ types) {
  const char* name = PyCapsule_GetName(api.ptr());
  if (!name && PyErr_Occurred()) throw_python();
  if (!name || std::string(name) != capi::kEpCApiName) {
    throw py::type_error(std::string("symmoe._torch_ep.init: expected the capsule ") + capi::kEpCApiName + ", got " +
                         (name ? name : "an unnamed capsule"));
  }
  const auto* table = static_cast<const capi::EpCApi*>(PyCapsule_GetPointer(api.ptr(), name));
  if (!table) throw_python();
  if (table->version != capi::kEpCApiVersion || table->struct_size != int(sizeof(capi::EpCApi))) {
    throw std::runtime_error("symmoe._torch_ep was built against another symmoe._C (C interface version " +
                             std::to_string(capi::kEpCApiVersion) + ", size " + std::to_string(sizeof(capi::EpCApi)) +
                             "; symmoe._C has version " + std::to_string(table->version) + ", size " +
                             std::to_string(table->struct_size) +
                             "): rebuild it with python/tests_gpu/build_torch_ext.sh");
  }
  const py::object state_cls = module_attr(types, "EpState"), handle_cls = module_attr(types, "EPHandle");
  const py::object event_cls = module_attr(types, "EventOverlap"), marker_fn = module_attr(types, "framework_marker");
  if (!PyType_Check(state_cls.ptr()) || !PyType_Check(handle_cls.ptr()) || !PyType_Check(event_cls.ptr()) ||
      !PyCallable_Check(marker_fn.ptr())) {
    throw py::type_error(
        "symmoe._torch_ep.init: symmoe._ep_types.EpState / EPHandle / EventOverlap must be classes "
        "and framework_marker a function");
  }
  Globals r;
  for (int i = 0; i < kNumStateFields; ++i) r.state_offsets[i] = slot_offset(state_cls.ptr(), kStateFields[i]);
  for (int i = 0; i < kNumHandleFields; ++i) r.handle_offsets[i] = slot_offset(handle_cls.ptr(), kHandleFields[i]);
  for (const char* method : {"take_native_handle", "give_back_native_handle"}) {
    if (!PyCallable_Check(module_attr(state_cls, method).ptr())) {
      throw py::type_error(std::string("symmoe._torch_ep.init: EpState.") + method + " is not a method");
    }
  }
  const py::object bf16 = module_attr(types, "BF16_PAYLOAD");
  r.max_expert_alignment = module_attr(types, "MAX_EXPERT_ALIGNMENT").cast<int64_t>();
  r.empty_tuple = PyTuple_New(0);
  if (!r.empty_tuple) throw_python();
  r.key_bf16 = bf16.inc_ref().ptr();
  r.name_float32 = intern("float32"), r.name_int32 = intern("int32");
  r.take_native_handle = intern("take_native_handle"), r.give_back_native_handle = intern("give_back_native_handle");
  r.state_type = reinterpret_cast<PyTypeObject*>(state_cls.inc_ref().ptr());
  r.handle_type = reinterpret_cast<PyTypeObject*>(handle_cls.inc_ref().ptr());
  r.event_cls = event_cls.inc_ref().ptr();
  r.marker_fn = marker_fn.inc_ref().ptr();
  r.api = table;
  g = r;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "symmoe's eager ElasticBuffer dispatch / combine in C++ over libtorch (symmoe._ep_eager uses it)";
  m.def("init", &init, py::arg("api"), py::arg("types"),
        "binds the module to symmoe: the capsule symmoe._C._ep_capi and the module symmoe._ep_types (the records "
        "EpState and EPHandle, EventOverlap, framework_marker, BF16_PAYLOAD, MAX_EXPERT_ALIGNMENT)");
  for (PyMethodDef& def : kFastDefs) {
    PyObject* f = PyCFunction_NewEx(&def, nullptr, m.attr("__name__").ptr());
    if (!f) throw py::error_already_set();
    m.add_object(def.ml_name, py::reinterpret_steal<py::object>(f));
  }
  m.def(
      "tensor_type", [] { return py::reinterpret_borrow<py::object>(THPVariableClass); },
      "the torch.Tensor class this module was built against (symmoe._ep_eager uses the module only for it)");
}
