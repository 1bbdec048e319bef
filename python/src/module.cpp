// symmoe._C: the extension module. Each binding file registers its part; the `symmoe` package wraps them.
#include "bindings.hpp"
#include "symmoe/env.hpp"

PYBIND11_MODULE(_C, m) {
  m.doc() = "symmoe C++ core (formats, planner, golden model, EP runtime); use the `symmoe` package instead";
  using namespace symmoe::py_bind;
  bind_errors(m);
  bind_formats(m);
  bind_plan(m);
  bind_reference(m);
  bind_dlpack(m);
  bind_runtime(m);
  bind_mega(m);
  bind_ep_capi(m);
  symmoe::env::warn_unknown_names();  // misspelt SYMMOE_* knobs are named at import, as at the CLI's start
}
