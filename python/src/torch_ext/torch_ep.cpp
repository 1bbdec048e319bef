// symmoe._torch_ep: the eager fast path of ElasticBuffer.dispatch / combine (python/symmoe/_ep_eager.py) in C++
// over libtorch, so that an eager pair costs the C++ call plus a few microseconds: the checks read the tensors
// directly, the outputs are at::empty (torch's caching allocator, on the current stream of the rank's GPU, as
// torch.empty), and the call goes to symmoe._C through its C interface (python/src/ep_capi.hpp).
// Optional: python/tests_gpu/build_torch_ext.sh builds it where torch is installed; symmoe._ep_eager uses it when
// it imports and falls back to its own Python otherwise.
// Contract: dispatch() and combine() are _ep_eager.dispatch / combine: the same arguments, outputs, EPHandle fields,
// EventOverlap, stream order (ElasticBuffer._last_stream) and native handle pool, or None whenever the Python
// version returns None or the case is one it leaves to the general path (tensor subclasses included): symmoe.ep
// then makes the call and words any error. Errors of the call itself are those of symmoe._C (ep_capi.hpp); torch's
// (an allocation that fails) are torch's Python exceptions.
// NOTES: one truth for the state: every field is read from the ElasticBuffer / EPHandle objects at each call (a
// dict lookup each), nothing is cached here but the classes and interned names of init(). Host cost: dispatch and
// combine are METH_FASTCALL functions (no pybind11 argument dispatch), outputs come from at::detail::empty_cuda
// (torch.empty's CUDA kernel without the dispatcher) whenever torch.empty would do nothing more (see new_empty),
// and a fresh EPHandle's fields go straight into its __dict__.
#include <ATen/Context.h>
#include <ATen/cuda/EmptyTensor.h>
#include <Python.h>
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
constexpr int kMaxExpertAlignment = 1024;

// Set once by init() and kept for the life of the process (strong references, never released: the module cannot
// be unloaded, and releasing them at exit could run after the interpreter is gone).
struct Globals {
  const capi::EpCApi* api = nullptr;
  PyObject* handle_cls = nullptr;  // symmoe.ep.EPHandle
  PyObject* event_cls = nullptr;   // symmoe.ep.EventOverlap
  PyObject* marker_fn = nullptr;   // symmoe.ep._framework_marker
  PyObject* marker = nullptr;      // what it returns for a torch tensor (one object for the process)
  PyObject* empty_tuple = nullptr;
  PyObject* key_bf16 = nullptr;  // ("bf16", "none")
  PyObject* key_fp8[3] = {};     // ("fp8", s) for s in kScales
  PyObject* scale_names[3] = {};
};
Globals g;
const char* const kScales[3] = {"fp32_per128", "ue8m0_per32", "ue8m0_per128"};

// Interned attribute names of ElasticBuffer and EPHandle (init() makes them).
struct Names {
  PyObject *device, *hidden, *num_max_tokens_per_rank, *num_topk, *num_experts, *_sf_cols, *_natives, *_last_stream;
  PyObject *allow_multiple_reduction, *_take_native_handle, *_give_back_native_handle;
  PyObject *_buffer, *_filled, *_shared_topk_idx, *native, *row_capacity, *num_sms, *_impl_key, *_like, *_eager_info;
};
Names n;

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
// Whether buf._last_stream lets a call on `stream` go without ordering (None, or the same stream).
bool same_stream_as_last(PyObject* buf, uintptr_t stream) {
  const py::object last = get(buf, n._last_stream);
  if (last.is_none()) return true;
  if (!PyLong_Check(last.ptr())) return false;
  const unsigned long long v = PyLong_AsUnsignedLongLong(last.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return v == static_cast<unsigned long long>(stream);
}
// buf.<name> as an exact int, false when it is not one (None included).
bool int_attr(PyObject* o, PyObject* name, int64_t* out) { return exact_int(get(o, name).ptr(), out); }

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

// The marker _ep._framework_marker returns for torch tensors (made on first use, as the Python path does).
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
  int64_t known;  // rows known from a CPU sync (-1: unknown), as _ep_eager._handle_info
};
HandleInfo handle_info(PyObject* native) {
  HandleInfo r{};
  if (g.api->handle_info(native, &r.h) != 0) throw_python();
  r.known = r.h.do_expand ? r.h.num_expanded_tokens : r.h.num_recv_tokens;
  return r;
}
// handle._buffer is buf, handle._filled, handle._shared_topk_idx is None (what both fast paths require).
bool usable_handle(PyObject* handle, PyObject* buf) {
  const int is = PyObject_IsInstance(handle, g.handle_cls);
  if (is < 0) throw_python();
  if (!is || get(handle, n._buffer).ptr() != buf || !truthy(get(handle, n._filled).ptr())) return false;
  return get(handle, n._shared_topk_idx).is_none();
}

py::object dispatch_impl(PyObject* buf, PyObject* x_obj, PyObject* idx_obj, PyObject* w_obj, PyObject* alignment_obj,
                         PyObject* num_sms_obj, PyObject* do_expand_obj, PyObject* zero_padding_obj,
                         PyObject* handle_copy_obj, PyObject* handle) {
  const py::object none = py::none();
  int64_t dev = 0, H = 0, T_max = 0, buf_topk = 0, num_experts = 0;
  if (!int_attr(buf, n.device, &dev) || !int_attr(buf, n.hidden, &H)) return none;
  // payload: bf16 x, or an (x, sf) pair of float8_e4m3fn / uint8 x and float32 / int32 scales
  PyObject* sf_obj = nullptr;
  PyObject* key = g.key_bf16;
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
    const py::object cols = get(buf, n._sf_cols);
    if (!PyDict_Check(cols.ptr())) return none;
    auto cols_of = [&](int i) -> int64_t {  // buf._sf_cols.get(kScales[i]), -1 when absent
      PyObject* v = PyDict_GetItemWithError(cols.ptr(), g.scale_names[i]);
      if (!v && PyErr_Occurred()) throw_python();
      int64_t c = -1;
      return v && exact_int(v, &c) ? c : -1;
    };
    int scales = -1;
    if (sf->scalar_type() == at::kFloat) {
      scales = 0;
    } else if (sf->scalar_type() == at::kInt) {
      scales = sf_cols == cols_of(1) ? 1 : sf_cols == cols_of(2) ? 2 : -1;
    }
    if (scales < 0 || sf_cols != cols_of(scales)) return none;
    key = g.key_fp8[scales];
    if (x->scalar_type() != at::ScalarType::Float8_e4m3fn && x->scalar_type() != at::kByte) return none;
  } else if (x->scalar_type() != at::kBFloat16) {
    return none;
  }
  const at::Tensor* w = as_tensor(w_obj);
  if (!w || !on_rank(*x, dev) || !on_rank(*w, dev)) return none;
  if (x->dim() != 2 || x->size(1) != H) return none;
  const int64_t T = x->size(0);

  const bool cached = handle != Py_None;
  if (!int_attr(buf, n.num_topk, &buf_topk)) return none;
  int64_t K = 0, alignment = 1;
  bool expand = false;
  uintptr_t idx_ptr = 0;
  if (cached) {  // the handle's routing, expand mode and alignment
    if (idx_obj != Py_None || !usable_handle(handle, buf)) return none;
    const HandleInfo info = handle_info(get(handle, n.native).ptr());
    if (info.known >= 0 || info.h.num_tokens != T) return none;  // rows known: the general path copies exactly those
    if (alignment_obj != Py_None) {
      int64_t a = 0;
      if (!exact_int(alignment_obj, &a) || a != info.h.expert_alignment) return none;
    }
    K = info.h.num_topk, expand = info.h.do_expand != 0, alignment = info.h.expert_alignment;
    idx_ptr = info.h.topk_idx;
  } else {
    K = buf_topk, expand = truthy(do_expand_obj);
    const at::Tensor* idx = as_tensor(idx_obj);
    if (!idx || !on_rank(*idx, dev) || idx->scalar_type() != at::kLong || !shape_is(*idx, T, K)) return none;
    if (alignment_obj != Py_None &&
        (!exact_int(alignment_obj, &alignment) || alignment < 1 || alignment > kMaxExpertAlignment)) {
      return none;
    }
    idx_ptr = address(*idx);
  }
  if (!int_attr(buf, n.num_max_tokens_per_rank, &T_max)) return none;
  if (T > T_max || K == 0 || (sf && sf->size(0) != T) || w->scalar_type() != at::kFloat || !shape_is(*w, T, K)) {
    return none;
  }
  int64_t num_sms = 0;
  if (!exact_int(num_sms_obj, &num_sms) || num_sms < 0 || num_sms > INT32_MAX) return none;
  if (!int_attr(buf, n.num_experts, &num_experts) || buf_topk == 0) return none;
  const py::object natives = get(buf, n._natives);
  if (!PyDict_Check(natives.ptr())) return none;
  PyObject* impl = PyDict_GetItemWithError(natives.ptr(), key);  // borrowed
  if (!impl) {
    if (PyErr_Occurred()) throw_python();
    return none;  // the general path allocates the payload's buffer
  }
  const py::object impl_ref = py::reinterpret_borrow<py::object>(impl);
  const uintptr_t stream = current_stream(dev);
  if (!same_stream_as_last(buf, stream)) return none;  // ordered after another stream (or graph capture)
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
    if (cached) set(handle, n._like, mark);
    recv_x = new_empty({rows, H}, x->scalar_type(), device, direct);
    if (sf) recv_sf = new_empty({rows, sf_cols}, sf->scalar_type(), device, direct);
    if (!expand) recv_idx = new_empty({rows, K}, at::kLong, device, direct);
    recv_w = expand ? new_empty({rows}, at::kFloat, device, direct) : new_empty({rows, K}, at::kFloat, device, direct);
    if (cached) {
      native = get(handle, n.native);
    } else {
      PyObject* taken = PyObject_CallMethodNoArgs(buf, n._take_native_handle);
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
    if (PyObject_SetAttr(buf, n._last_stream, stream_int.ptr()) == 0 && native && !cached) {
      Py_XDECREF(PyObject_CallMethodOneArg(buf, n._give_back_native_handle, native.ptr()));
    }
    PyErr_Clear();
    throw;
  }
  set(buf, n._last_stream, stream_int.ptr());
  const py::object rows_int = new_int(row_capacity);
  py::object out_handle;
  if (cached) {  // a cached dispatch without CPU sync leaves the handle's counts (and _eager_info) as they were
    set(handle, n.row_capacity, rows_int.ptr());
    out_handle = py::reinterpret_borrow<py::object>(handle);
  } else {
    out_handle = bare_instance(g.handle_cls);
    // Straight into the new instance's __dict__: init() checked that EPHandle has no data descriptor of these names,
    // so this is what the nine setattr calls would do.
    PyObject* d = PyObject_GenericGetDict(out_handle.ptr(), nullptr);
    if (!d) throw_python();
    const py::object dict = py::reinterpret_steal<py::object>(d);
    const py::tuple info = py::make_tuple(T, K, expand, -1, alignment);
    PyObject* const fields[][2] = {
        {n._buffer, buf},           {n.native, native.ptr()},
        {n._impl_key, key},         {n.row_capacity, rows_int.ptr()},
        {n.num_sms, num_sms_obj},   {n._like, mark},
        {n._filled, Py_True},       {n._shared_topk_idx, truthy(handle_copy_obj) ? Py_None : idx_obj},
        {n._eager_info, info.ptr()}};
    for (const auto& f : fields) {
      if (PyDict_SetItem(d, f[0], f[1]) < 0) throw_python();
    }
  }
  py::object recv = sf ? py::object(py::make_tuple(recv_x, recv_sf)) : py::cast(recv_x);
  return py::make_tuple(recv, expand ? none : py::cast(recv_idx), recv_w, out_handle, bare_instance(g.event_cls));
}

py::object combine_impl(PyObject* buf, PyObject* x_obj, PyObject* handle, PyObject* w_obj, PyObject* num_sms_obj,
                        PyObject* cpu_sync_obj) {
  const py::object none = py::none();
  const at::Tensor* x = as_tensor(x_obj);
  if (!x || !usable_handle(handle, buf)) return none;
  const py::object native = get(handle, n.native);
  const HandleInfo info = handle_info(native.ptr());
  const int64_t T = info.h.num_tokens, K = info.h.num_topk;
  const bool expand = info.h.do_expand != 0;
  int64_t dev = 0, H = 0, capacity = 0;
  if (!int_attr(buf, n.device, &dev) || !int_attr(buf, n.hidden, &H)) return none;
  if (!on_rank(*x, dev) || x->scalar_type() != at::kBFloat16 || x->dim() != 2 || x->size(1) != H) return none;
  const int64_t rows = x->size(0);
  if (!int_attr(handle, n.row_capacity, &capacity)) return none;
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
  if (num_sms == 0 && (!int_attr(handle, n.num_sms, &handle_sms) || handle_sms < 0 || handle_sms > INT32_MAX)) {
    return none;
  }
  const py::object natives = get(buf, n._natives);
  if (!PyDict_Check(natives.ptr())) return none;
  const py::object key = get(handle, n._impl_key);
  PyObject* impl = PyDict_GetItemWithError(natives.ptr(), key.ptr());  // borrowed
  if (!impl) {
    if (PyErr_Occurred()) throw_python();
    return none;
  }
  const py::object impl_ref = py::reinterpret_borrow<py::object>(impl);
  const uintptr_t stream = current_stream(dev);
  if (!same_stream_as_last(buf, stream)) return none;
  const bool reduce = expand && truthy(get(buf, n.allow_multiple_reduction).ptr());
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
    if (g.api->combine_one(impl, native.ptr(), &c) != 0) throw_python();
  } catch (...) {
    PyObject_SetAttr(buf, n._last_stream, stream_int.ptr());
    PyErr_Clear();
    throw;
  }
  set(buf, n._last_stream, stream_int.ptr());
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
     "_ep_eager.dispatch(buf, x, topk_idx, topk_weights, expert_alignment, num_sms, do_expand, do_zero_padding, "
     "do_handle_copy, handle) in C++ (positional arguments)"},
    {"combine", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fastcall<&combine, 6>)), METH_FASTCALL,
     "_ep_eager.combine(buf, x, handle, topk_weights, num_sms, do_cpu_sync) in C++ (positional arguments)"},
};

PyObject* intern(const char* s) {
  PyObject* r = PyUnicode_InternFromString(s);
  if (!r) throw_python();
  return r;
}
PyObject* key_tuple(const char* dtype, const char* scales) {
  PyObject* r = Py_BuildValue("(ss)", dtype, scales);
  if (!r) throw_python();
  return r;
}

void init(py::capsule api, py::handle handle_cls, py::handle event_cls, py::handle marker_fn) {
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
  if (!PyType_Check(handle_cls.ptr()) || !PyType_Check(event_cls.ptr()) || !PyCallable_Check(marker_fn.ptr())) {
    throw py::type_error("symmoe._torch_ep.init(api, EPHandle, EventOverlap, _framework_marker): wrong arguments");
  }
  n.device = intern("device"), n.hidden = intern("hidden");
  n.num_max_tokens_per_rank = intern("num_max_tokens_per_rank"), n.num_topk = intern("num_topk");
  n.num_experts = intern("num_experts"), n._sf_cols = intern("_sf_cols"), n._natives = intern("_natives");
  n._last_stream = intern("_last_stream"), n.allow_multiple_reduction = intern("allow_multiple_reduction");
  n._take_native_handle = intern("_take_native_handle");
  n._give_back_native_handle = intern("_give_back_native_handle");
  n._buffer = intern("_buffer"), n._filled = intern("_filled"), n._shared_topk_idx = intern("_shared_topk_idx");
  n.native = intern("native"), n.row_capacity = intern("row_capacity"), n.num_sms = intern("num_sms");
  n._impl_key = intern("_impl_key"), n._like = intern("_like"), n._eager_info = intern("_eager_info");
  // dispatch_impl writes a fresh EPHandle's fields into its __dict__: none may be a data descriptor (a property).
  for (PyObject* name : {n._buffer, n.native, n._impl_key, n.row_capacity, n.num_sms, n._like, n._filled,
                         n._shared_topk_idx, n._eager_info}) {
    PyObject* attr = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(handle_cls.ptr()), name);  // borrowed
    if (attr && Py_TYPE(attr)->tp_descr_set) {
      throw py::type_error("symmoe._torch_ep.init: EPHandle." + py::str(name).cast<std::string>() +
                           " is a data descriptor; the extension writes that field into the instance's __dict__");
    }
  }
  g.empty_tuple = PyTuple_New(0);
  if (!g.empty_tuple) throw_python();
  g.key_bf16 = key_tuple("bf16", "none");
  for (int i = 0; i < 3; ++i) g.key_fp8[i] = key_tuple("fp8", kScales[i]), g.scale_names[i] = intern(kScales[i]);
  g.handle_cls = handle_cls.inc_ref().ptr();
  g.event_cls = event_cls.inc_ref().ptr();
  g.marker_fn = marker_fn.inc_ref().ptr();
  g.marker = nullptr;
  g.api = table;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "symmoe's eager ElasticBuffer dispatch / combine in C++ over libtorch (symmoe._ep_eager uses it)";
  m.def("init", &init, py::arg("api"), py::arg("handle_cls"), py::arg("event_cls"), py::arg("marker_fn"),
        "binds the module to symmoe: the capsule symmoe._C._ep_capi, symmoe.ep.EPHandle, EventOverlap and "
        "_framework_marker");
  for (PyMethodDef& def : kFastDefs) {
    PyObject* f = PyCFunction_NewEx(&def, nullptr, m.attr("__name__").ptr());
    if (!f) throw py::error_already_set();
    m.add_object(def.ml_name, py::reinterpret_steal<py::object>(f));
  }
  m.def(
      "tensor_type", [] { return py::reinterpret_borrow<py::object>(THPVariableClass); },
      "the torch.Tensor class this module was built against (symmoe._ep_eager uses the module only for it)");
}
