// STUB for the syntax check of python/src/torch_ext/torch_ep.cpp only (see ../../../../README.md): not libtorch.
#pragma once
#include <cstdint>

namespace c10 {
enum class DispatchKey : uint16_t { Undefined, CUDA, Python };
namespace impl {
bool tls_is_dispatch_key_included(DispatchKey x);
}  // namespace impl
}  // namespace c10
