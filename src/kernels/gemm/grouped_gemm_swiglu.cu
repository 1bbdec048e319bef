// Compiled configurations of the grouped GEMM with the L1 (SwiGLU + FP8) epilogue.
#include "kernels/gemm/launch.cuh"

namespace symmoe::gemm::kernel {

void launch_swiglu(const KernelConfig& c, const GemmParams& params, const CUtensorMap& tmap_a,
                   const CUtensorMap& tmap_sfa, const CUtensorMap& tmap_b, int num_ctas, cudaStream_t stream) {
  constexpr auto kSwiglu = EpilogueKind::kSwigluFp8;
  if (c.block_m == 64 && c.num_stages == 5 && c.cluster_m == 1)
    return launch_config<64, 256, 5, 1, kSwiglu>(params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  if (c.block_m == 64 && c.num_stages == 5 && c.cluster_m == 2)
    return launch_config<64, 256, 5, 2, kSwiglu>(params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  if (c.block_m == 128 && c.num_stages == 4 && c.cluster_m == 1)
    return launch_config<128, 256, 4, 1, kSwiglu>(params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  if (c.block_m == 128 && c.num_stages == 4 && c.cluster_m == 2)
    return launch_config<128, 256, 4, 2, kSwiglu>(params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  SYMMOE_FAIL("gemm", "no compiled kernel for ", c.to_string());
}

}  // namespace symmoe::gemm::kernel
