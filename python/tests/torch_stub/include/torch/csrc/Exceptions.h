// STUB for the syntax check of python/src/torch_ext/torch_ep.cpp only (see ../../../README.md): not libtorch. The
// two macros have the shape of PyTorch's (a try block with a warning handler, catch clauses that rethrow), so the
// functions that use them are checked as they will compile.
#pragma once
#include <torch/extension.h>

namespace torch {
struct PyWarningHandler {
  void set_in_exception();
};
}  // namespace torch

#define HANDLE_TH_ERRORS                          \
  try {                                           \
    torch::PyWarningHandler __enforce_warning_buffer; \
    try {
#define END_HANDLE_TH_ERRORS_PYBIND                 \
  }                                                 \
  catch (...) {                                     \
    __enforce_warning_buffer.set_in_exception();    \
    throw;                                          \
  }                                                 \
  }                                                 \
  catch (pybind11::error_already_set & e) {         \
    throw;                                          \
  }                                                 \
  catch (const std::exception& e) {                 \
    throw pybind11::error_already_set();            \
  }
