// Strict numpy arguments of the CPU helpers (declared in bindings.hpp): py::array_t's forcecast would turn 300 into
// the E4M3 code 44, 1.5 into the bf16 bits 1 and an expert id 3.7 into 3 without a word.
#include <cmath>
#include <cstdint>

#include "bindings.hpp"

namespace symmoe::py_bind {
namespace {

std::string dtype_name(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

}  // namespace

py::array checked_integers(const py::object& obj, const std::string& what, const char* expected, long long lo,
                           unsigned long long hi) {
  const py::array a = py::array::ensure(obj);
  if (!a) throw py::type_error(what + " must be " + expected + ", got a " + std::string(py::str(obj.get_type())));
  if (a.size() == 0) return a;  // nothing to reinterpret (np.asarray([]) is float64)
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::type_error(detail::concat(what, " must be ", expected, " (an integer array), got dtype ", dtype_name(a),
                                        kind == 'f' ? ": floats are not reinterpreted as codes" : ""));
  const auto report = [&](py::ssize_t i, const std::string& value) {
    throw py::value_error(detail::concat(what, " must be ", expected, " (values in [", lo, ", ", hi, "]), got ", value,
                                         " at flat index ", i));
  };
  if (kind == 'u') {
    const auto u = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    for (py::ssize_t i = 0; i < u.size(); ++i)
      if (u.data()[i] > hi || (lo > 0 && u.data()[i] < uint64_t(lo))) report(i, std::to_string(u.data()[i]));
  } else {
    const auto s = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    for (py::ssize_t i = 0; i < s.size(); ++i) {
      const int64_t v = s.data()[i];
      if (v < lo || (v >= 0 && uint64_t(v) > hi)) report(i, std::to_string(v));
    }
  }
  return a;
}

CArray<float> real_array(const py::object& obj, const std::string& what) {
  const py::array a = py::array::ensure(obj);
  if (!a) throw py::type_error(what + " must be a real array, got a " + std::string(py::str(obj.get_type())));
  const char kind = a.dtype().kind();
  if (a.size() != 0 && kind != 'f' && kind != 'i' && kind != 'u')
    throw py::type_error(detail::concat(what, " must be a real (float or integer) array, got dtype ", dtype_name(a)));
  return CArray<float>::ensure(a);
}

void check_finite_rows(const CArray<float>& a, const std::string& what, int block) {
  const py::ssize_t cols = a.ndim() == 2 ? a.shape(1) : a.size();
  const float* p = a.data();
  for (py::ssize_t i = 0; i < a.size(); ++i)
    if (!std::isfinite(p[i])) {
      const py::ssize_t row = cols ? i / cols : 0, col = cols ? i % cols : 0;
      throw py::value_error(detail::concat(what, " must be finite, got ", p[i], " at row ", row, ", column ", col,
                                           " (column block ", block > 0 ? col / block : 0, " of ", block,
                                           ": its scale would be decided by this value)"));
    }
}

}  // namespace symmoe::py_bind
