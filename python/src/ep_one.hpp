// One local rank's EpBuffer::dispatch / combine: the calls of the ElasticBuffer path, shared by the methods
// symmoe._C.EpBuffer.dispatch_one / combine_one (bind_runtime.cpp) and the C interface symmoe._C._ep_capi
// (bind_ep_capi.cpp), so that both make exactly the same call. Called with the GIL held; they release it while the
// C++ call runs (the handle stays owned by its Python object, also when the call throws).
#pragma once

#include "ep_capi.hpp"
#include "symmoe/ep.hpp"

namespace symmoe::py_bind {

EpDispatchResult dispatch_one(EpBuffer& buffer, EpHandle& handle, const ep_capi::DispatchCall& call);
EpCombineResult combine_one(EpBuffer& buffer, EpHandle& handle, const ep_capi::CombineCall& call);

}  // namespace symmoe::py_bind
