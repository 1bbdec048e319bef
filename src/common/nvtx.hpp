// NVTX ranges for Nsight Systems / Nsight Compute (CUDA's header-only nvtx3): one RAII type, used in host code
// around the layer calls and their stages (EP dispatch/combine, composed and fused layers, GEMM launches).
// NOTES: without a profiler attached, nvtx3 finds no injection library on its first call and sets its function
// pointers to null: each later push/pop is one null-pointer check. Ranges live in the "symmoe" domain, so
// `nsys profile --nvtx-domain-include=symmoe` selects them.
#pragma once

#include <nvtx3/nvToolsExt.h>

namespace symmoe::nvtx {

inline nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t handle = nvtxDomainCreateA("symmoe");
  return handle;
}

// Pushes a range named `name` (a string literal: NVTX keeps no copy beyond the call) for the scope's lifetime.
class Range {
 public:
  explicit Range(const char* name) {
    nvtxEventAttributes_t attr{};
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = name;
    nvtxDomainRangePushEx(domain(), &attr);
  }
  ~Range() { nvtxDomainRangePop(domain()); }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};

}  // namespace symmoe::nvtx

#define SYMMOE_NVTX_CONCAT2(a, b) a##b
#define SYMMOE_NVTX_CONCAT(a, b) SYMMOE_NVTX_CONCAT2(a, b)
// SYMMOE_NVTX_RANGE("ep.dispatch"); — a range until the end of the enclosing scope.
#define SYMMOE_NVTX_RANGE(name) ::symmoe::nvtx::Range SYMMOE_NVTX_CONCAT(symmoe_nvtx_range_, __LINE__)(name)
