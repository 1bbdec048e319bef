// The C interface between symmoe._C and symmoe._torch_ep (python/src/torch_ext/torch_ep.cpp, the optional libtorch
// extension that runs ElasticBuffer's eager dispatch and combine without Python in between). symmoe._C exports one
// EpCApi as the PyCapsule symmoe._C._ep_capi (named kEpCApiName). Plain C types only: the two modules share no C++
// ABI (pybind11 internals, std::string, exceptions), and the extension needs this header alone, no symmoe library.
// Contract:
// - Every function is called with the GIL held and returns 0, or -1 with the Python exception set that symmoe._C's
//   own bindings would raise (symmoe._C.Error / PeerTimeout with their attributes, TypeError for an object that is
//   not a symmoe._C.EpBuffer / EpHandle). dispatch_one and combine_one release the GIL while the C++ call runs.
// - dispatch_one / combine_one are symmoe._C.EpBuffer.dispatch_one / combine_one (python/src/bind_runtime.cpp) for
//   one local rank: the same arguments (device addresses and the cudaStream_t as integers; 0 = none) and effects.
// - A consumer checks version == kEpCApiVersion and struct_size == sizeof(EpCApi) before any call; any change of
//   a struct below bumps kEpCApiVersion.
#pragma once

#include <Python.h>

#include <cstdint>

namespace symmoe::ep_capi {

inline constexpr char kEpCApiName[] = "symmoe._C._ep_capi";
inline constexpr int kEpCApiVersion = 1;

// The host fields of a symmoe._C.EpHandle that the eager calls read (include/symmoe/ep.hpp, EpHandle).
struct HandleInfo {
  int num_tokens, num_topk, do_expand, expert_alignment;
  int num_recv_tokens, num_expanded_tokens;  // -1: unknown (no CPU sync)
  uintptr_t topk_idx;                        // the handle's own copy of the routing, int64 [num_tokens, num_topk]
};

struct DispatchCall {  // EpDispatchArgs + EpDispatchOptions of one local rank
  int num_tokens;
  uintptr_t x, x_scales, topk_idx, topk_weights, stream;
  int expand, expert_alignment, zero_padding, cached, num_sms, cpu_sync;
  uintptr_t recv_x_out, recv_scales_out, recv_topk_idx_out, recv_topk_weights_out;
  int out_rows;
};

struct CombineCall {  // EpCombineArgs + EpCombineOptions of one local rank
  uintptr_t x, topk_weights, bias_0, bias_1, stream;
  int reduce_local_experts, num_sms, cpu_sync;
  uintptr_t combined_x_out, combined_topk_weights_out;
};

struct EpCApi {
  int version;      // kEpCApiVersion
  int struct_size;  // sizeof(EpCApi)
  int (*handle_info)(PyObject* native_handle, HandleInfo* out);
  // EpBuffer::row_capacity(expand, expert_alignment) into *rows.
  int (*row_capacity)(PyObject* ep_buffer, int expand, int expert_alignment, int* rows);
  // *num_rows, *row_capacity: EpDispatchResult's (num_rows -1 without cpu_sync).
  int (*dispatch_one)(PyObject* ep_buffer, PyObject* native_handle, const DispatchCall* call, int* num_rows,
                      int* row_capacity);
  int (*combine_one)(PyObject* ep_buffer, PyObject* native_handle, const CombineCall* call);
};

}  // namespace symmoe::ep_capi
