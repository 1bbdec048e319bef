// The library's dispatch kernel: every phase (kSkip 0; the phase-skipping variants are bench-only, skip.hpp).
#include "kernels/ep/dispatch_kernel.cuh"

namespace symmoe::ep {

size_t dispatch_smem_bytes(const layout::EpDims& dims) { return size_t(DispatchSmemLayout(dims).num_bytes()); }

void launch_dispatch(const DispatchParams& p, int num_ctas, cudaStream_t stream) {
  launch_dispatch_kernel<0>(p, num_ctas, stream);
}

}  // namespace symmoe::ep
