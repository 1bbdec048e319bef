// The library's combine kernel: every phase (kSkip 0; the phase-skipping variants are bench-only, skip.hpp).
#include "kernels/ep/combine_kernel.cuh"

namespace symmoe::ep {

void launch_combine(const CombineParams& p, int num_ctas, cudaStream_t stream) {
  launch_combine_kernel<0>(p, num_ctas, stream);
}

}  // namespace symmoe::ep
