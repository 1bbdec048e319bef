// symmoe::Error reaches Python as symmoe._C.Error (a RuntimeError) with the C++ message (component, text, site);
// symmoe::PeerTimeout as symmoe._C.PeerTimeout (a subclass) with rank / peer / wait_site attributes.
#include "bindings.hpp"
#include "symmoe/runtime.hpp"

namespace symmoe::py_bind {

std::pair<int, int> shape_2d(const py::array& a, const char* what) {
  SYMMOE_CHECK(a.ndim() == 2, "python", what, " must be 2-D, got ", a.ndim(), "-D");
  return {int(a.shape(0)), int(a.shape(1))};
}

fmt::ScaleFormat parse_scale_format(const std::string& name) {
  if (name == "fp32") return fmt::ScaleFormat::kFp32;
  if (name == "ue8m0") return fmt::ScaleFormat::kUe8m0;
  SYMMOE_FAIL("python", "scale_format must be 'fp32' or 'ue8m0', got '", name, "'");
}

void bind_errors(py::module_& m) {
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<PeerTimeout> timeout(m, "PeerTimeout", error.ptr());
  // Most derived first: the translator sees the exception before pybind11's std::exception fallback.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const PeerTimeout& e) {
      py::object exc = py::reinterpret_borrow<py::object>(timeout.ptr())(e.what());
      exc.attr("rank") = e.rank();
      exc.attr("peer") = e.peer();
      exc.attr("wait_site") = e.wait_site();
      exc.attr("component") = e.component();
      exc.attr("site") = e.site();
      PyErr_SetObject(timeout.ptr(), exc.ptr());
    } catch (const Error& e) {
      py::object exc = py::reinterpret_borrow<py::object>(error.ptr())(e.what());
      exc.attr("component") = e.component();
      exc.attr("site") = e.site();
      PyErr_SetObject(error.ptr(), exc.ptr());
    }
  });
}

}  // namespace symmoe::py_bind
