// symmoe._C._ep_capi: the C interface of ep_capi.hpp, for symmoe._torch_ep (the optional libtorch extension of
// python/src/torch_ext). Each entry point unwraps its symmoe._C objects with pybind11's casters, makes the same
// call as the matching symmoe._C.EpBuffer method (ep_one.hpp), and turns any exception into the Python error that
// method would raise (set_python_error), so that no C++ exception crosses the module boundary.
#include "bindings.hpp"
#include "ep_capi.hpp"
#include "ep_one.hpp"

#include <string>

namespace symmoe::py_bind {
namespace {

// 0 after f(), or -1 with the Python error of what f() threw.
template <typename F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (...) {
    set_python_error(std::current_exception());
    return -1;
  }
}

// The C++ object of a symmoe._C.EpBuffer / EpHandle; TypeError naming `what` for any other object.
template <typename T>
T& unwrap(PyObject* obj, const char* what) {
  const py::handle h(obj);
  if (!py::isinstance<T>(h)) {
    throw py::type_error(std::string("symmoe._C._ep_capi: expected a symmoe._C.") + what + ", got " +
                         Py_TYPE(obj)->tp_name);
  }
  return h.cast<T&>();
}

int handle_info(PyObject* native_handle, ep_capi::HandleInfo* out) {
  return guarded([&] {
    const EpHandle& h = unwrap<EpHandle>(native_handle, "EpHandle");
    out->num_tokens = h.num_tokens, out->num_topk = h.num_topk, out->do_expand = h.do_expand ? 1 : 0;
    out->expert_alignment = h.expert_alignment;
    out->num_recv_tokens = h.num_recv_tokens, out->num_expanded_tokens = h.num_expanded_tokens;
    out->topk_idx = reinterpret_cast<uintptr_t>(h.topk_idx);
  });
}

int row_capacity(PyObject* ep_buffer, int expand, int expert_alignment, int* rows) {
  return guarded([&] { *rows = unwrap<EpBuffer>(ep_buffer, "EpBuffer").row_capacity(expand != 0, expert_alignment); });
}

int dispatch_one_c(PyObject* ep_buffer, PyObject* native_handle, const ep_capi::DispatchCall* call, int* num_rows,
                   int* capacity) {
  return guarded([&] {
    EpBuffer& b = unwrap<EpBuffer>(ep_buffer, "EpBuffer");
    EpHandle& h = unwrap<EpHandle>(native_handle, "EpHandle");
    const EpDispatchResult r = dispatch_one(b, h, *call);
    *num_rows = r.num_rows, *capacity = r.row_capacity;
  });
}

int combine_one_c(PyObject* ep_buffer, PyObject* native_handle, const ep_capi::CombineCall* call) {
  return guarded([&] {
    EpBuffer& b = unwrap<EpBuffer>(ep_buffer, "EpBuffer");
    EpHandle& h = unwrap<EpHandle>(native_handle, "EpHandle");
    combine_one(b, h, *call);
  });
}

const ep_capi::EpCApi kApi{
    ep_capi::kEpCApiVersion, sizeof(ep_capi::EpCApi), handle_info, row_capacity, dispatch_one_c, combine_one_c};

}  // namespace

void bind_ep_capi(py::module_& m) {
  // The capsule holds a pointer to a constant of this module: nothing to free.
  m.attr("_ep_capi") = py::capsule(static_cast<const void*>(&kApi), ep_capi::kEpCApiName);
}

}  // namespace symmoe::py_bind
