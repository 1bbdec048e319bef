// symmoe._torch_ep: the eager fast path of ElasticBuffer.dispatch / combine (python/symmoe/_ep_eager.py) in C++
// over libtorch, so that an eager pair costs the C++ call plus a few microseconds: the checks read the tensors
// directly, the outputs come from torch's caching allocator (on the current stream of the rank's GPU, as
// torch.empty; the outputs of one call from one allocation, see Outputs), and the call goes to symmoe._C through its
// C interface (python/src/ep_capi.hpp).
// Optional: python/tests_gpu/build_torch_ext.sh builds it where torch is installed; symmoe._ep_eager uses it when
// it imports and falls back to its own Python otherwise.
// Contract: dispatch() and combine() are _ep_eager.dispatch / combine: the same arguments (the buffer's EpState
// first), outputs, EPHandle record, EventOverlap, stream order (EpState.last_stream) and native handle pool, or None
// whenever the Python version returns None or the case is one it leaves to the general path (tensor subclasses
// included): symmoe.ep then makes the call and words any error. One difference a caller can see: the outputs of
// one call share one storage, each at its own offset (Outputs; the Python path allocates each on its own).
// Errors of the call itself are those of symmoe._C (ep_capi.hpp); torch's (an allocation that fails) are torch's
// Python exceptions.
// The state and the handle are the records of python/symmoe/_ep_types.py (EpState, EPHandle), the one definition
// the three paths share: init() takes that module, resolves every field used here (kStateFields, kHandleFields) to
// its __slots__ member and refuses a module whose classes lack one, and takes the payload key of bf16, the largest
// expert alignment, the scale-format table (per EpState) and the framework marker from it, not from copies here.
// NOTES: host cost. A record field is one load at a fixed offset (no attribute lookup); dispatch and combine are
// METH_FASTCALL functions (no pybind11 argument dispatch); outputs come from at::detail::empty_cuda (torch.empty's
// CUDA kernel without the dispatcher) whenever torch.empty would do nothing more (see direct_empty), the outputs
// of one call from one allocation (Outputs: one allocator round trip per call, not per output). No Python frame
// runs in an eager call: ElasticBuffer.dispatch / combine themselves are C entry points of this module
// (bind_buffer: the condition of ep.py's fast path, then dispatch_impl / combine_impl), the native handle comes
// from the EpState's pool and goes back to it here (take_native, EPHandle.__del__ = handle_del), and a handle's
// routing is read from its record (routing_of), not through symmoe._C. What is left per call is torch's: the
// outputs allocated (one block per call) and wrapped (python/tests_gpu/ep_host_breakdown.py's ext_alloc rows time
// them alone).
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContextLight.h>
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
#include <utility>
#include <vector>

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
  kRowCapacities,
  kFreeNativeHandles,
  kNewNativeHandle,
  kNumStateFields
};
constexpr const char* kStateFields[kNumStateFields] = {"device",
                                                       "hidden",
                                                       "num_max_tokens_per_rank",
                                                       "num_topk",
                                                       "num_experts",
                                                       "allow_multiple_reduction",
                                                       "natives",
                                                       "scale_formats",
                                                       "last_stream",
                                                       "row_capacities",
                                                       "free_native_handles",
                                                       "new_native_handle"};
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
  Py_ssize_t native_pool_size = 0;  // _ep_types.NATIVE_HANDLE_POOL_SIZE
  Py_ssize_t state_offsets[kNumStateFields] = {};
  Py_ssize_t handle_offsets[kNumHandleFields] = {};
};
Globals g;

// What bind_buffer() sets: the ElasticBuffer class whose dispatch / combine are this module's C entry points.
struct Bound {
  PyObject* chosen = nullptr;  // symmoe._ep_eager._chosen: [torch module, implementation] of the last choice
  PyObject* module = nullptr;  // this module (the implementation the entry points stand for)
  PyObject* name_torch = nullptr;
  PyObject* name_state = nullptr;  // ElasticBuffer attributes and methods (interned)
  PyObject* name_zero_copy = nullptr;
  PyObject* dispatch_python = nullptr;
  PyObject* dispatch_general = nullptr;
  PyObject* combine_python = nullptr;
  PyObject* combine_general = nullptr;
  PyObject* zero = nullptr;  // the int 0 (a default)
  std::string dispatch_doc, combine_doc;
};
Bound bound;

[[noreturn]] void throw_python() { throw py::error_already_set(); }

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
py::object new_uint(uintptr_t v) {
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

// EpState.take_native_handle(): the pool's last native handle, else a new one (state.new_native_handle()). The
// pool is read here (no Python frame); a state whose pool is not a list goes through the method.
py::object take_native(PyObject* state) {
  PyObject* pool = field(state, kFreeNativeHandles);
  PyObject* r = nullptr;
  if (pool && PyList_CheckExact(pool)) {
    const Py_ssize_t n = PyList_GET_SIZE(pool);
    if (n > 0) {
      r = PyList_GET_ITEM(pool, n - 1);
      Py_INCREF(r);
      if (PyList_SetSlice(pool, n - 1, n, nullptr) < 0) {
        Py_DECREF(r);
        throw_python();
      }
    } else if (PyObject* make = field(state, kNewNativeHandle)) {
      r = PyObject_CallNoArgs(make);
    } else {
      r = PyObject_CallMethodNoArgs(state, g.take_native_handle);  // raises what the Python raises
    }
  } else {
    r = PyObject_CallMethodNoArgs(state, g.take_native_handle);
  }
  if (!r) throw_python();
  return py::reinterpret_steal<py::object>(r);
}

// EpState.give_back_native_handle(native): into the pool while the buffer has payload buffers and the pool holds
// fewer than NATIVE_HANDLE_POOL_SIZE (else it is dropped: freed with its last reference). 0, or -1 with the error.
int give_back_native(PyObject* state, PyObject* native) {
  PyObject* pool = field(state, kFreeNativeHandles);
  PyObject* natives = field(state, kNatives);
  if (!pool || !PyList_CheckExact(pool) || !natives || !PyDict_CheckExact(natives)) {
    PyObject* r = PyObject_CallMethodOneArg(state, g.give_back_native_handle, native);
    Py_XDECREF(r);
    return r ? 0 : -1;
  }
  if (PyDict_GET_SIZE(natives) > 0 && PyList_GET_SIZE(pool) < g.native_pool_size) return PyList_Append(pool, native);
  return 0;
}

// EPHandle.__del__ (python/symmoe/_ep_types.py) in C, installed on the class by init(): the same effect without a
// Python frame at each handle's release. A record never completed (a slot unset) has nothing to give back.
PyObject* handle_del(PyObject* self, PyObject*) {
  PyObject* owner = slot(self, g.handle_offsets[kOwner]);
  PyObject* native = slot(self, g.handle_offsets[kNative]);
  if (!owner || !native || owner == Py_None || native == Py_None) Py_RETURN_NONE;
  const py::object keep_owner = py::reinterpret_borrow<py::object>(owner);
  const py::object keep_native = py::reinterpret_borrow<py::object>(native);
  int rc = 0;
  if (Py_IS_TYPE(owner, g.state_type)) {
    rc = give_back_native(owner, native);
  } else {
    PyObject* r = PyObject_CallMethodOneArg(owner, g.give_back_native_handle, native);
    rc = r ? 0 : -1;
    Py_XDECREF(r);
  }
  if (rc < 0) return nullptr;
  Py_RETURN_NONE;
}
PyMethodDef kHandleDelDef = {"__del__", reinterpret_cast<PyCFunction>(&handle_del), METH_NOARGS,
                             "gives the native handle back to its buffer's pool (symmoe._torch_ep, in C)"};

// EpState.row_capacity(native, expand, expert_alignment): the state's cache (row_capacities, the dict the Python
// paths fill), filled through symmoe._C on a miss.
int row_capacity_of(PyObject* state, PyObject* impl, bool expand, int64_t alignment) {
  PyObject* cache = field(state, kRowCapacities);
  const py::object align_int = new_int(alignment);
  const py::object key =
      py::reinterpret_steal<py::object>(PyTuple_Pack(3, impl, expand ? Py_True : Py_False, align_int.ptr()));
  if (!key) throw_python();
  if (cache && PyDict_CheckExact(cache)) {
    PyObject* v = PyDict_GetItemWithError(cache, key.ptr());  // borrowed
    int64_t rows = 0;
    if (v && exact_int(v, &rows) && rows >= 0 && rows <= INT32_MAX) return int(rows);
    if (!v && PyErr_Occurred()) throw_python();
  }
  int capacity = 0;
  if (g.api->row_capacity(impl, expand, int(alignment), &capacity) != 0) throw_python();
  if (cache && PyDict_CheckExact(cache)) {
    const py::object rows = new_int(capacity);
    if (PyDict_SetItem(cache, key.ptr(), rows.ptr()) < 0) throw_python();
  }
  return capacity;
}

// torch.empty(shape, dtype=dtype, device=device): torch's caching allocator, on the current stream of `device`.
// at::detail::empty_cuda is what torch.empty's CUDA kernel calls; the dispatcher adds nothing to it but a
// deterministic fill (torch.use_deterministic_algorithms) and what a Python dispatch mode (TorchDispatchMode,
// FakeTensorMode) does instead: in those cases the call goes through at::empty.
bool direct_empty() {
  return !at::globalContext().deterministicAlgorithms() &&
         !c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::Python);
}

// The outputs of one call (dispatch: recv_x, recv_sf, recv_topk_idx, recv_topk_weights; combine: combined_x,
// combined_topk_weights), each contiguous, of its own shape and dtype, on `device`, as torch.empty makes them, from
// ONE allocation of torch's caching allocator (`direct`; a call with one output is exactly torch.empty):
//   block = at::detail::empty_cuda(block_bytes / itemsize of the first output), that tensor resized (metadata
//   only) to the first output; every further output a TensorImpl over the same c10::Storage at its own offset,
//   each offset a multiple of kOutputAlignment bytes (block_layout), so the outputs never overlap.
// One allocator round trip, StorageImpl and deleter instead of one per output (the ext_alloc rows of
// python/tests_gpu/ep_host_breakdown.py). What a caller can see: the outputs of one call share one storage
// (untyped_storage(), storage_offset() > 0 for all but the first; the memory goes back to torch's allocator when
// the last of them is dropped; record_stream on one covers the block); each is a plain tensor of its own (no view
// of another: own version counter, _base None), dtype, shape, strides and device as before. Without `direct` (a
// deterministic fill or a Python dispatch mode wants to see each aten::empty) every output is its own at::empty,
// as before.
constexpr int64_t kOutputAlignment = 256;
constexpr int kMaxOutputs = 4;
struct Outputs {
  int n = 0;
  int64_t shape[kMaxOutputs][2] = {};
  int64_t dims[kMaxOutputs] = {};
  at::ScalarType dtype[kMaxOutputs] = {};
  at::Tensor* dst[kMaxOutputs] = {};

  void add(at::Tensor* t, int64_t rows, int64_t cols, at::ScalarType type) {  // cols < 0: the 1-D shape (rows,)
    shape[n][0] = rows, shape[n][1] = cols, dims[n] = cols < 0 ? 1 : 2, dtype[n] = type, dst[n++] = t;
  }
  at::IntArrayRef sizes(int i) const { return at::IntArrayRef(shape[i], size_t(dims[i])); }
  int64_t nbytes(int i) const {
    int64_t items = 1;
    for (int d = 0; d < dims[i]; ++d) items *= shape[i][d];
    return items * int64_t(c10::elementSize(dtype[i]));
  }
  // Byte offsets of the outputs in the block (each rounded up to kOutputAlignment) and the block's size (rounded
  // up likewise, so a multiple of every itemsize).
  int64_t block_layout(int64_t* offset) const {
    int64_t end = 0;
    for (int i = 0; i < n; ++i) {
      offset[i] = (end + kOutputAlignment - 1) / kOutputAlignment * kOutputAlignment;
      end = offset[i] + nbytes(i);
    }
    return (end + kOutputAlignment - 1) / kOutputAlignment * kOutputAlignment;
  }
  void make(const at::Device& device, bool direct) {
    if (!direct) {
      for (int i = 0; i < n; ++i) *dst[i] = at::empty(sizes(i), at::TensorOptions().dtype(dtype[i]).device(device));
      return;
    }
    if (n == 1) {
      *dst[0] = at::Tensor(at::detail::empty_cuda(sizes(0), dtype[0], device, at::MemoryFormat::Contiguous));
      return;
    }
    int64_t offset[kMaxOutputs] = {};
    const int64_t bytes = block_layout(offset);
    const int64_t first_items = bytes / int64_t(c10::elementSize(dtype[0]));
    at::Tensor block(
        at::detail::empty_cuda(at::IntArrayRef(&first_items, 1), dtype[0], device, at::MemoryFormat::Contiguous));
    constexpr c10::DispatchKeySet kCuda(c10::DispatchKey::CUDA);  // as at::detail::empty_cuda's TensorImpl
    for (int i = 1; i < n; ++i) {
      at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(block.storage()), kCuda,
                                                              c10::scalarTypeToTypeMeta(dtype[i]));
      c10::TensorImpl* impl = t.unsafeGetTensorImpl();
      impl->set_storage_offset(offset[i] / int64_t(c10::elementSize(dtype[i])));
      impl->set_sizes_contiguous(sizes(i));
      *dst[i] = std::move(t);
    }
    block.unsafeGetTensorImpl()->set_sizes_contiguous(sizes(0));  // offset 0: the block's own tensor
    *dst[0] = std::move(block);
  }
};

// The marker _ep_types.framework_marker returns for torch tensors (made on first use, as the Python path does).
PyObject* marker(PyObject* x) {
  if (!g.marker) {
    PyObject* m = PyObject_CallOneArg(g.marker_fn, x);
    if (!m) throw_python();
    g.marker = m;
  }
  return g.marker;
}

// A filled handle's routing: EPHandle.routing, (num_tokens, num_topk, do_expand, known rows or -1,
// expert_alignment), read from the record; when unset (None: a general-path dispatch rewrote the native's counts)
// read from the native handle and stored, as _ep_eager._routing does.
struct Routing {
  int64_t num_tokens, num_topk, known, expert_alignment;
  bool expand;
};
bool routing_from_tuple(PyObject* t, Routing* r) {
  if (!t || !PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 5) return false;
  PyObject* expand = PyTuple_GET_ITEM(t, 2);
  if (expand != Py_True && expand != Py_False) return false;
  r->expand = expand == Py_True;
  return exact_int(PyTuple_GET_ITEM(t, 0), &r->num_tokens) && exact_int(PyTuple_GET_ITEM(t, 1), &r->num_topk) &&
         exact_int(PyTuple_GET_ITEM(t, 3), &r->known) && exact_int(PyTuple_GET_ITEM(t, 4), &r->expert_alignment);
}
Routing routing_of(PyObject* handle) {
  Routing r{};
  if (routing_from_tuple(field(handle, kRouting), &r)) return r;
  capi::HandleInfo h{};
  if (g.api->handle_info(field(handle, kNative), &h) != 0) throw_python();
  r.num_tokens = h.num_tokens, r.num_topk = h.num_topk, r.expand = h.do_expand != 0;
  r.known = r.expand ? h.num_expanded_tokens : h.num_recv_tokens, r.expert_alignment = h.expert_alignment;
  const py::tuple t = py::make_tuple(r.num_tokens, r.num_topk, r.expand, r.known, r.expert_alignment);
  store(handle, kRouting, t.ptr());
  return r;
}
// The native handle's topk_idx address: EPHandle.topk_idx_ptr, read from the native once (as _ep_eager).
uintptr_t topk_idx_ptr_of(PyObject* handle) {
  PyObject* v = field(handle, kTopkIdxPtr);
  if (v && PyLong_CheckExact(v)) {
    const unsigned long long p = PyLong_AsUnsignedLongLong(v);
    if (!(p == static_cast<unsigned long long>(-1) && PyErr_Occurred())) return static_cast<uintptr_t>(p);
    PyErr_Clear();
  }
  capi::HandleInfo h{};
  if (g.api->handle_info(field(handle, kNative), &h) != 0) throw_python();
  const py::object ptr = new_uint(h.topk_idx);
  store(handle, kTopkIdxPtr, ptr.ptr());
  return h.topk_idx;
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
    const Routing r = routing_of(handle);
    if (r.known >= 0 || r.num_tokens != T) return none;  // rows known: the general path copies exactly those
    if (alignment_obj != Py_None) {
      int64_t a = 0;
      if (!exact_int(alignment_obj, &a) || a != r.expert_alignment) return none;
    }
    K = r.num_topk, expand = r.expand, alignment = r.expert_alignment;
    idx_ptr = topk_idx_ptr_of(handle);
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
  const int capacity = row_capacity_of(state, impl, expand, alignment);
  PyObject* mark = marker(x_obj);

  const at::Device device = x->device();
  const bool direct = direct_empty();
  const int64_t rows = capacity;
  const py::object stream_int = new_uint(stream);
  py::object native;
  at::Tensor recv_x, recv_sf, recv_idx, recv_w;
  int num_rows = 0, row_capacity = 0;
  try {
    if (cached) store(handle, kLike, mark);
    // _ep_types.new_dispatch_outputs' shapes and dtypes, from one allocation (Outputs::make)
    Outputs outs;
    outs.add(&recv_x, rows, H, x->scalar_type());
    if (sf) outs.add(&recv_sf, rows, sf_cols, sf->scalar_type());
    if (!expand) outs.add(&recv_idx, rows, K, at::kLong);
    outs.add(&recv_w, rows, expand ? -1 : K, at::kFloat);
    outs.make(device, direct);
    native = cached ? py::reinterpret_borrow<py::object>(field(handle, kNative)) : take_native(state);
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
    if (native && !cached) give_back_native(state, native.ptr());
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
  const Routing info = routing_of(handle);
  const int64_t T = info.num_tokens, K = info.num_topk;
  const bool expand = info.expand;
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
  const py::object stream_int = new_uint(stream);
  at::Tensor combined_x, combined_w;
  try {
    Outputs outs;  // one allocation (Outputs::make)
    outs.add(&combined_x, T, H, at::kBFloat16);
    if (w) outs.add(&combined_w, T, K, at::kFloat);
    outs.make(device, direct);
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

// Fn(args) as a Python result: a new reference, or null with the Python error as pybind11 would set it (torch's
// errors are already Python errors here, see SYMMOE_TORCH_ERRORS_END).
template <py::object (*Fn)(PyObject* const*)>
PyObject* guarded(PyObject* const* args) {
  try {
    return Fn(args).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}
// dispatch / combine as METH_FASTCALL functions (positional arguments only, as _ep_eager calls them).
template <py::object (*Fn)(PyObject* const*), Py_ssize_t N>
PyObject* fastcall(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != N) {
    PyErr_Format(PyExc_TypeError, "symmoe._torch_ep: expected %zd positional arguments, got %zd", N, nargs);
    return nullptr;
  }
  return guarded<Fn>(args);
}

// ---- ElasticBuffer.dispatch / combine as C entry points (bind_buffer) ----
// The parameters of ElasticBuffer.dispatch / combine after self (python/symmoe/ep.py), in order, with their
// defaults; python/tests/test_ep_records.py checks both lists against the Python signatures.
enum Default : uint8_t { kRequired, kNone, kZero, kTrue, kFalse };
struct Param {
  const char* name;
  Default value;
};
enum DispatchArg {
  dX,
  dTopkIdx,
  dTopkWeights,
  dStats,
  dNumExperts,
  dMaxTokens,
  dAlignment,
  dNumSms,
  dNumQps,
  dPreviousEvent,
  dPreviousEventBeforeEpilogue,
  dAsync,
  dAllocateOnComm,
  dHandle,
  dHandleCopy,
  dCpuSync,
  dExpand,
  dZeroPadding,
  dColMajorSf,
  kNumDispatchArgs
};
constexpr Param kDispatchParams[kNumDispatchArgs] = {
    {"x", kRequired},
    {"topk_idx", kNone},
    {"topk_weights", kNone},
    {"cumulative_local_expert_recv_stats", kNone},
    {"num_experts", kNone},
    {"num_max_tokens_per_rank", kNone},
    {"expert_alignment", kNone},
    {"num_sms", kZero},
    {"num_qps", kZero},
    {"previous_event", kNone},
    {"previous_event_before_epilogue", kNone},
    {"async_with_compute_stream", kFalse},
    {"allocate_on_comm_stream", kFalse},
    {"handle", kNone},
    {"do_handle_copy", kTrue},
    {"do_cpu_sync", kNone},
    {"do_expand", kFalse},
    {"do_zero_padding", kTrue},
    {"use_tma_aligned_col_major_sf", kFalse},
};
enum CombineArg {
  cX,
  cHandle,
  cTopkWeights,
  cBias,
  cNumSms,
  cNumQps,
  cPreviousEvent,
  cPreviousEventBeforeEpilogue,
  cAsync,
  cAllocateOnComm,
  cReduceLocalExperts,
  cCpuSync,
  kNumCombineArgs
};
constexpr Param kCombineParams[kNumCombineArgs] = {
    {"x", kRequired},
    {"handle", kNone},
    {"topk_weights", kNone},
    {"bias", kNone},
    {"num_sms", kZero},
    {"num_qps", kZero},
    {"previous_event", kNone},
    {"previous_event_before_epilogue", kNone},
    {"async_with_compute_stream", kFalse},
    {"allocate_on_comm_stream", kFalse},
    {"reduce_local_experts", kNone},
    {"do_cpu_sync", kFalse},
};
PyObject* g_dispatch_names[kNumDispatchArgs] = {};  // interned by bind_buffer
PyObject* g_combine_names[kNumCombineArgs] = {};
// How the entry points ended each call (entry_counts(): ep_host_breakdown.py shows that its timed calls were fast).
enum EntryEnd { kFast, kGeneral, kForwarded, kNumEntryEnds };
uint64_t g_entry_counts[2][kNumEntryEnds] = {};  // [dispatch, combine][how]

// The call's arguments by parameter (borrowed; defaults filled in). False for anything Python would refuse or
// that is not a plain call (too many positionals, an unknown or repeated keyword, x missing): the Python function
// then takes the call and raises what it raises.
template <size_t N>
bool parse(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, const Param (&params)[N],
           PyObject* const (&names)[N], PyObject* (&out)[N]) {
  if (nargs < 0 || size_t(nargs) > N) return false;
  for (size_t i = 0; i < N; ++i) out[i] = i < size_t(nargs) ? args[i] : nullptr;
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t j = 0; j < nkw; ++j) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, j);
    size_t i = 0;
    while (i < N && names[i] != key) ++i;  // interned names: one pointer compare each (call sites intern them)
    if (i == N) {
      for (i = 0; i < N; ++i) {
        const int eq = PyObject_RichCompareBool(names[i], key, Py_EQ);
        if (eq < 0) {
          PyErr_Clear();
          return false;
        }
        if (eq) break;
      }
    }
    if (i == N || out[i]) return false;
    out[i] = args[nargs + j];
  }
  for (size_t i = 0; i < N; ++i) {
    if (out[i]) continue;
    switch (params[i].value) {
      case kRequired:
        return false;
      case kNone:
        out[i] = Py_None;
        break;
      case kZero:
        out[i] = bound.zero;
        break;
      case kTrue:
        out[i] = Py_True;
        break;
      case kFalse:
        out[i] = Py_False;
        break;
    }
  }
  return true;
}

// Whether this module is what ElasticBuffer's Python entry would call: symmoe._ep_eager._chosen is (sys.modules'
// torch, this module). Any other choice (the Python path, a test's spy, none yet) goes to the Python function.
bool chosen_here() {
  PyObject* c = bound.chosen;
  if (!c || !PyList_CheckExact(c) || PyList_GET_SIZE(c) != 2 || PyList_GET_ITEM(c, 1) != bound.module) return false;
  PyObject* torch = PyDict_GetItemWithError(PyImport_GetModuleDict(), bound.name_torch);  // borrowed
  if (!torch) {
    PyErr_Clear();
    return false;
  }
  return PyList_GET_ITEM(c, 0) == torch;
}
// 1 when `flag` is true, 0 when false, -1 on an error.
int flag_set(PyObject* flag) { return flag == Py_False || flag == Py_None ? 0 : PyObject_IsTrue(flag); }
// not self.zero_copy_outputs: 1, 0, or -1 on an error.
int copies_outputs(PyObject* self) {
  PyObject* v = PyObject_GetAttr(self, bound.name_zero_copy);
  if (!v) return -1;
  const int t = flag_set(v);
  Py_DECREF(v);
  return t < 0 ? -1 : !t;
}

// ElasticBuffer.dispatch's condition for the eager fast path (ep.py), term by term in its order: 1 taken, 0 not,
// -1 an error (the Python function evaluates it again and raises).
int dispatch_condition(PyObject* self, PyObject* state, PyObject* const* v) {
  PyObject* sync = v[dCpuSync];
  if (!(sync == Py_False || (sync == Py_None && v[dHandle] != Py_None))) return 0;
  if (v[dPreviousEvent] != Py_None || v[dTopkWeights] == Py_None || v[dPreviousEventBeforeEpilogue] != Py_None) {
    return 0;
  }
  for (PyObject* flag : {v[dAsync], v[dAllocateOnComm]}) {
    const int t = flag_set(flag);
    if (t != 0) return t < 0 ? -1 : 0;
  }
  if (v[dStats] != Py_None) return 0;
  int t = flag_set(v[dColMajorSf]);
  if (t != 0) return t < 0 ? -1 : 0;
  if ((t = copies_outputs(self)) <= 0) return t;
  const std::pair<PyObject*, StateField> fixed[] = {{v[dNumExperts], kNumExperts}, {v[dMaxTokens], kMaxTokens}};
  for (const auto& [arg, f] : fixed) {  // `arg is None or arg == self.<field>` (the fields are the state's)
    if (arg == Py_None) continue;
    PyObject* have = field(state, f);
    if (!have) return -1;
    if ((t = PyObject_RichCompareBool(arg, have, Py_EQ)) <= 0) return t;
  }
  return 1;
}
// ElasticBuffer.combine's condition for the eager fast path (ep.py).
int combine_condition(PyObject* self, PyObject* const* v) {
  if (v[cBias] != Py_None || v[cPreviousEvent] != Py_None || v[cPreviousEventBeforeEpilogue] != Py_None) return 0;
  for (PyObject* flag : {v[cAsync], v[cAllocateOnComm]}) {
    const int t = flag_set(flag);
    if (t != 0) return t < 0 ? -1 : 0;
  }
  if (v[cReduceLocalExperts] != Py_None) return 0;
  return copies_outputs(self);
}

// self.<method>(<the call's own arguments>): the Python function takes a call the C entry does not make.
PyObject* forward(PyObject* method, PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const Py_ssize_t n = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
  std::vector<PyObject*> all(size_t(n) + 1);
  all[0] = self;
  for (Py_ssize_t i = 0; i < n; ++i) all[size_t(i) + 1] = args[i];
  return PyObject_VectorcallMethod(method, all.data(), size_t(nargs) + 1, kwnames);
}
// self.<method>(*v): the general path with every parameter, positionally.
template <size_t N>
PyObject* general(PyObject* method, PyObject* self, PyObject* const (&v)[N]) {
  PyObject* all[N + 1];
  all[0] = self;
  for (size_t i = 0; i < N; ++i) all[i + 1] = v[i];
  return PyObject_VectorcallMethod(method, all, N + 1, nullptr);
}
// self._state when it is an EpState (a new reference), else null (no error set).
PyObject* state_of(PyObject* self) {
  PyObject* state = PyObject_GetAttr(self, bound.name_state);
  if (state && PyObject_TypeCheck(state, g.state_type)) return state;
  Py_XDECREF(state);
  PyErr_Clear();
  return nullptr;
}

// ElasticBuffer.dispatch: ep.py's body with this module chosen, without its Python frame.
PyObject* buffer_dispatch(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* v[kNumDispatchArgs];
  if (g.api && chosen_here() && parse(args, nargs, kwnames, kDispatchParams, g_dispatch_names, v)) {
    if (PyObject* state = state_of(self)) {
      const py::object keep = py::reinterpret_steal<py::object>(state);
      const int fast = dispatch_condition(self, state, v);
      if (fast > 0) {
        PyObject* const a[10] = {state,      v[dX],      v[dTopkIdx],     v[dTopkWeights], v[dAlignment],
                                 v[dNumSms], v[dExpand], v[dZeroPadding], v[dHandleCopy],  v[dHandle]};
        PyObject* out = guarded<&dispatch>(a);
        if (out != Py_None) {
          ++g_entry_counts[0][kFast];
          return out;  // the outputs, or null with the call's error
        }
        Py_DECREF(out);
        ++g_entry_counts[0][kGeneral];
        return general(bound.dispatch_general, self, v);
      }
      if (fast < 0) PyErr_Clear();
    }
  }
  ++g_entry_counts[0][kForwarded];
  return forward(bound.dispatch_python, self, args, nargs, kwnames);
}

// ElasticBuffer.combine: likewise.
PyObject* buffer_combine(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* v[kNumCombineArgs];
  if (g.api && chosen_here() && parse(args, nargs, kwnames, kCombineParams, g_combine_names, v)) {
    const int fast = combine_condition(self, v);
    if (fast > 0) {
      if (PyObject* state = state_of(self)) {
        const py::object keep = py::reinterpret_steal<py::object>(state);
        PyObject* const a[6] = {state, v[cX], v[cHandle], v[cTopkWeights], v[cNumSms], v[cCpuSync]};
        PyObject* out = guarded<&combine>(a);
        if (out != Py_None) {
          ++g_entry_counts[1][kFast];
          return out;
        }
        Py_DECREF(out);
        ++g_entry_counts[1][kGeneral];
        return general(bound.combine_general, self, v);
      }
    }
    if (fast < 0) PyErr_Clear();
  }
  ++g_entry_counts[1][kForwarded];
  return forward(bound.combine_python, self, args, nargs, kwnames);
}

PyMethodDef kBufferDefs[] = {
    {"dispatch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&buffer_dispatch)),
     METH_FASTCALL | METH_KEYWORDS, nullptr},
    {"combine", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&buffer_combine)),
     METH_FASTCALL | METH_KEYWORDS, nullptr},
};

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
  r.native_pool_size = module_attr(types, "NATIVE_HANDLE_POOL_SIZE").cast<Py_ssize_t>();
  r.state_type = reinterpret_cast<PyTypeObject*>(state_cls.inc_ref().ptr());
  r.handle_type = reinterpret_cast<PyTypeObject*>(handle_cls.inc_ref().ptr());
  r.event_cls = event_cls.inc_ref().ptr();
  r.marker_fn = marker_fn.inc_ref().ptr();
  r.api = table;
  // EPHandle.__del__ in C (handle_del): same effect as the Python method it replaces, no Python frame per handle.
  PyObject* del = PyDescr_NewMethod(r.handle_type, &kHandleDelDef);
  if (!del) throw_python();
  const py::object del_ref = py::reinterpret_steal<py::object>(del);
  g = r;
  if (PyObject_SetAttrString(handle_cls.ptr(), "__del__", del) < 0) throw_python();
}

// Makes cls.dispatch / cls.combine (ElasticBuffer, python/symmoe/ep.py) this module's C entry points: returns the
// two method descriptors for symmoe._ep_eager to set on the class. chosen: symmoe._ep_eager._chosen; module: this
// module; the docs carry the Python functions' signatures (__text_signature__). The class provides
// _dispatch_python / _dispatch_general / _combine_python / _combine_general, called by name on the instance.
py::tuple bind_buffer(py::handle cls, py::handle chosen, py::handle module, const std::string& dispatch_doc,
                      const std::string& combine_doc) {
  if (!g.api) throw std::runtime_error("symmoe._torch_ep.bind_buffer: init() has not been called");
  if (!PyType_Check(cls.ptr()) || !PyList_CheckExact(chosen.ptr()) || !PyModule_Check(module.ptr())) {
    throw py::type_error("symmoe._torch_ep.bind_buffer(cls, chosen, module, dispatch_doc, combine_doc): wrong types");
  }
  for (const char* name : {"_dispatch_python", "_dispatch_general", "_combine_python", "_combine_general"}) {
    if (!PyCallable_Check(py::getattr(cls, name, py::none()).ptr())) {
      throw py::type_error(std::string("symmoe._torch_ep.bind_buffer: ") +
                           reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_name + "." + name + " is not a method");
    }
  }
  for (int i = 0; i < kNumDispatchArgs; ++i) {
    if (!g_dispatch_names[i]) g_dispatch_names[i] = intern(kDispatchParams[i].name);
  }
  for (int i = 0; i < kNumCombineArgs; ++i) {
    if (!g_combine_names[i]) g_combine_names[i] = intern(kCombineParams[i].name);
  }
  if (!bound.zero) {
    bound.zero = PyLong_FromLong(0);
    if (!bound.zero) throw_python();
    bound.name_torch = intern("torch"), bound.name_state = intern("_state"),
    bound.name_zero_copy = intern("zero_copy_outputs");
    bound.dispatch_python = intern("_dispatch_python"), bound.dispatch_general = intern("_dispatch_general");
    bound.combine_python = intern("_combine_python"), bound.combine_general = intern("_combine_general");
  }
  Py_XSETREF(bound.chosen, chosen.inc_ref().ptr());
  Py_XSETREF(bound.module, module.inc_ref().ptr());
  // The method definitions keep pointers to these strings for the life of the process (the descriptors' __doc__).
  bound.dispatch_doc = dispatch_doc, bound.combine_doc = combine_doc;
  kBufferDefs[0].ml_doc = bound.dispatch_doc.c_str(), kBufferDefs[1].ml_doc = bound.combine_doc.c_str();
  PyTypeObject* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  PyObject* d = PyDescr_NewMethod(type, &kBufferDefs[0]);
  if (!d) throw_python();
  const py::object dispatch_m = py::reinterpret_steal<py::object>(d);
  PyObject* c = PyDescr_NewMethod(type, &kBufferDefs[1]);
  if (!c) throw_python();
  const py::object combine_m = py::reinterpret_steal<py::object>(c);
  return py::make_tuple(dispatch_m, combine_m);
}

// ep_host_breakdown.py's allocation rows: one round of the allocations of a dispatch + combine, shaped like
// `groups` (a tuple of tuples of tensors: the outputs of one call each, e.g. dispatch's four and combine's one),
// each released at once. mode 0: torch's CUDA allocator alone (allocate and free the bytes the extension asks for:
// one block per call, Outputs::block_layout, or one per output where Outputs::make takes at::empty or the call has
// one output); 1: + the tensors (Outputs::make, as dispatch_impl / combine_impl make them); 2: + their Python
// objects (made, then dropped as a caller drops the outputs).
PyObject* probe_alloc(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  try {
    int64_t mode = 0;
    if (nargs != 2 || !exact_int(args[0], &mode) || mode < 0 || mode > 2 || !PyTuple_CheckExact(args[1])) {
      PyErr_SetString(PyExc_TypeError, "symmoe._torch_ep.probe_alloc(mode 0-2, tuple of tuples of torch tensors)");
      return nullptr;
    }
    const bool direct = direct_empty();
    for (Py_ssize_t gi = 0; gi < PyTuple_GET_SIZE(args[1]); ++gi) {
      PyObject* group = PyTuple_GET_ITEM(args[1], gi);
      const Py_ssize_t n = PyTuple_Check(group) ? PyTuple_GET_SIZE(group) : 0;
      if (n < 1 || n > kMaxOutputs) {
        PyErr_SetString(PyExc_TypeError, "symmoe._torch_ep.probe_alloc: each group is a tuple of 1-4 tensors");
        return nullptr;
      }
      at::Tensor made[kMaxOutputs];
      Outputs outs;
      at::Device device(c10::DeviceType::CUDA);
      for (Py_ssize_t i = 0; i < n; ++i) {
        const at::Tensor* t = as_tensor(PyTuple_GET_ITEM(group, i));
        if (!t || !t->is_cuda() || t->dim() < 1 || t->dim() > 2) {
          PyErr_SetString(PyExc_TypeError, "symmoe._torch_ep.probe_alloc: templates must be 1-D or 2-D CUDA tensors");
          return nullptr;
        }
        outs.add(&made[i], t->size(0), t->dim() == 2 ? t->size(1) : -1, t->scalar_type());
        device = t->device();
      }
      if (mode == 0) {
        int64_t offset[kMaxOutputs] = {};
        const int64_t block = outs.block_layout(offset);
        c10::Allocator* allocator = at::cuda::getCUDADeviceAllocator();
        if (direct && n > 1) {
          const c10::DataPtr bytes = allocator->allocate(size_t(block));  // freed here
        } else {
          for (int i = 0; i < n; ++i) const c10::DataPtr bytes = allocator->allocate(size_t(outs.nbytes(i)));
        }
      } else {
        outs.make(device, direct);
        if (mode == 2) {
          for (int i = 0; i < n; ++i) (void)py::cast(std::move(made[i]));  // the Python object, released at once
        }
      }
    }
    Py_RETURN_NONE;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}
PyMethodDef kProbeDef = {"probe_alloc", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&probe_alloc)),
                         METH_FASTCALL, "probe_alloc(mode, templates): ep_host_breakdown.py's allocation rows"};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "symmoe's eager ElasticBuffer dispatch / combine in C++ over libtorch (symmoe._ep_eager uses it)";
  m.def("init", &init, py::arg("api"), py::arg("types"),
        "binds the module to symmoe: the capsule symmoe._C._ep_capi and the module symmoe._ep_types (the records "
        "EpState and EPHandle, EventOverlap, framework_marker, BF16_PAYLOAD, MAX_EXPERT_ALIGNMENT)");
  m.def(
      "entry_counts",
      [] {
        py::dict d;
        const char* names[2] = {"dispatch", "combine"};
        for (int i = 0; i < 2; ++i) {
          d[names[i]] =
              py::dict(py::arg("fast") = g_entry_counts[i][kFast], py::arg("general") = g_entry_counts[i][kGeneral],
                       py::arg("python") = g_entry_counts[i][kForwarded]);
        }
        return d;
      },
      "calls of the C entry points ElasticBuffer.dispatch / combine so far, by how each ended: fast (this module's "
      "fast path), general (_dispatch_general / _combine_general), python (handed to the Python function)");
  m.def("bind_buffer", &bind_buffer, py::arg("cls"), py::arg("chosen"), py::arg("module"), py::arg("dispatch_doc"),
        py::arg("combine_doc"),
        "ElasticBuffer's dispatch / combine as this module's C entry points: returns the two method descriptors "
        "(symmoe._ep_eager.bind_buffer_class sets them on the class)");
  for (PyMethodDef* def : {&kFastDefs[0], &kFastDefs[1], &kProbeDef}) {
    PyObject* f = PyCFunction_NewEx(def, nullptr, m.attr("__name__").ptr());
    if (!f) throw py::error_already_set();
    m.add_object(def->ml_name, py::reinterpret_steal<py::object>(f));
  }
  m.def(
      "tensor_type", [] { return py::reinterpret_borrow<py::object>(THPVariableClass); },
      "the torch.Tensor class this module was built against (symmoe._ep_eager uses the module only for it)");
}
