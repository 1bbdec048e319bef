// Shared vocabulary of the symmoe._C binding files (python/src/bind_*.cpp): one bind_* entry point per file, and
// the numpy helpers they use. CPU paths take and return numpy arrays (copies are fine there); device tensors cross
// only through DLPack (dlpack_bridge.hpp), without copies.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "symmoe/common.hpp"
#include "symmoe/formats.hpp"

namespace symmoe::py_bind {
namespace py = pybind11;

void bind_errors(py::module_& m);     // symmoe._C.Error (RuntimeError) and PeerTimeout
void bind_formats(py::module_& m);    // element casts and block quantisation over numpy arrays
void bind_plan(py::module_& m);       // MoeShape, EP / GEMM / MegaMoE plans
void bind_reference(py::module_& m);  // golden model: routing, dispatch, combine, fused layer
void bind_dlpack(py::module_& m);     // DLPack descriptor reader (tensor_info) and test capsules
void bind_runtime(py::module_& m);    // Communicator, EpBuffer, EpHandle (GPU paths)
void bind_mega(py::module_& m);       // MegaMoe, ComposedMoe (GPU paths), the host L1 weight transform
void bind_ep_capi(py::module_& m);    // symmoe._C._ep_capi: the eager EP calls for symmoe._torch_ep (ep_capi.hpp)

// Sets the Python error that symmoe._C's bindings raise for this C++ exception (symmoe._C.Error / PeerTimeout with
// their attributes, pybind11's for its own and for std exceptions): for C entry points that cannot throw.
void set_python_error(const std::exception_ptr& p);

// C-contiguous array of T (converted if needed). `what` names the argument in errors.
template <typename T>
using CArray = py::array_t<T, py::array::c_style | py::array::forcecast>;

// A fresh C-contiguous numpy array of `shape` holding a copy of `n` elements at `data`.
template <typename T>
py::array_t<T> to_numpy(const T* data, const std::vector<py::ssize_t>& shape) {
  py::array_t<T> out(shape);
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  if (n) std::copy(data, data + n, out.mutable_data());
  return out;
}
template <typename T>
py::array_t<T> to_numpy(const std::vector<T>& v, const std::vector<py::ssize_t>& shape) {
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  SYMMOE_CHECK(n == v.size(), "python", "internal: ", v.size(), " elements do not fill shape of ", n);
  return to_numpy(v.data(), shape);
}
// The scalar fields both EPHandles (golden model's ref::EpHandle and the device EpHandle) share, with DeepEP's names.
template <typename Handle, typename... Extra>
void def_handle_scalars(py::class_<Handle, Extra...>& c) {
  c.def_readonly("rank", &Handle::rank)
      .def_readonly("num_ranks", &Handle::num_ranks)
      .def_readonly("do_expand", &Handle::do_expand)
      .def_readonly("num_experts", &Handle::num_experts)
      .def_readonly("num_topk", &Handle::num_topk)
      .def_readonly("expert_alignment", &Handle::expert_alignment)
      .def_readonly("num_max_tokens_per_rank", &Handle::num_max_tokens_per_rank)
      .def_readonly("num_tokens", &Handle::num_tokens)
      .def_readonly("num_recv_tokens", &Handle::num_recv_tokens)
      .def_readonly("num_expanded_tokens", &Handle::num_expanded_tokens)
      .def_readonly("num_recv_tokens_per_expert_list", &Handle::num_recv_tokens_per_expert_list);
}
template <typename T>
std::vector<T> to_vector(const CArray<T>& a) {
  return std::vector<T>(a.data(), a.data() + a.size());
}
// Checks a.ndim() == 2 and returns (rows, cols); `what` names the argument.
std::pair<int, int> shape_2d(const py::array& a, const char* what);

// Strict numpy arguments (python/src/numpy_args.cpp): values are converted, never reinterpreted. `what` names the
// argument in errors (TypeError for a wrong dtype, ValueError for a value out of range, each with expected and got).
// Integer codes and ids (E4M3 / E2M1 / UE8M0 bytes, bf16 bits, expert ids): an array or nested list of an integer
// dtype whose every value lies in [lo, hi] (default: T's range); float, bool and other dtypes are refused.
py::array checked_integers(const py::object& obj, const std::string& what, const char* expected, long long lo,
                           unsigned long long hi);
template <typename T>
CArray<T> integer_array(const py::object& obj, const std::string& what, const char* expected,
                        long long lo = std::numeric_limits<T>::min(),
                        unsigned long long hi = std::numeric_limits<T>::max()) {
  return CArray<T>::ensure(checked_integers(obj, what, expected, lo, hi));
}
// Real values: an array or nested list of a float or integer dtype, as float32 (bool, complex, text refused).
CArray<float> real_array(const py::object& obj, const std::string& what);
// Real values that must be finite (quantiser inputs: one Inf or NaN would decide a whole block's scale): ValueError
// naming the row and the `block`-wide column block of the first one.
void check_finite_rows(const CArray<float>& a, const std::string& what, int block);

fmt::ScaleFormat parse_scale_format(const std::string& name);  // "fp32" | "ue8m0"
}  // namespace symmoe::py_bind
