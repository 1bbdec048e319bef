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

namespace {
// symmoe._C.Error and PeerTimeout (made by bind_errors; they live as long as the interpreter).
PyObject* error_type = nullptr;
PyObject* timeout_type = nullptr;

// Sets the Python error of a symmoe::Error / PeerTimeout (the C++ message and attributes); false for any other.
bool set_symmoe_error(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (const PeerTimeout& e) {
    py::object exc = py::reinterpret_borrow<py::object>(timeout_type)(e.what());
    exc.attr("rank") = e.rank();
    exc.attr("peer") = e.peer();
    exc.attr("wait_site") = e.wait_site();
    exc.attr("component") = e.component();
    exc.attr("site") = e.site();
    PyErr_SetObject(timeout_type, exc.ptr());
    return true;
  } catch (const Error& e) {
    py::object exc = py::reinterpret_borrow<py::object>(error_type)(e.what());
    exc.attr("component") = e.component();
    exc.attr("site") = e.site();
    PyErr_SetObject(error_type, exc.ptr());
    return true;
  } catch (...) {
    return false;
  }
}
}  // namespace

void set_python_error(const std::exception_ptr& p) {
  if (set_symmoe_error(p)) return;
  try {
    std::rethrow_exception(p);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::bad_alloc&) {
    PyErr_SetString(PyExc_MemoryError, "std::bad_alloc");
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "symmoe: unknown C++ exception");
  }
}

void bind_errors(py::module_& m) {
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<PeerTimeout> timeout(m, "PeerTimeout", error.ptr());
  error_type = error.ptr(), timeout_type = timeout.ptr();
  // Most derived first (set_symmoe_error): the translator sees the exception before pybind11's std::exception
  // fallback; other exceptions go on to the next translator.
  py::register_exception_translator([](std::exception_ptr p) {
    if (!set_symmoe_error(p)) std::rethrow_exception(p);
  });
}

}  // namespace symmoe::py_bind
