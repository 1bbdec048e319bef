// STUB for the syntax check of python/src/torch_ext/torch_ep.cpp only (see ../../README.md): not libtorch.
#pragma once

namespace at {
class Context {
 public:
  bool deterministicAlgorithms() const;
};
Context& globalContext();
}  // namespace at
