// Compiled configurations of the grouped GEMM with the bf16 epilogue and 128 x 256 tiles.
#include "kernels/gemm/launch.cuh"

namespace symmoe::gemm::kernel {

void launch_bf16_wide(const KernelConfig& c, const GemmParams& params, const CUtensorMap& tmap_a,
                      const CUtensorMap& tmap_sfa, const CUtensorMap& tmap_b, int num_ctas, cudaStream_t stream) {
  constexpr auto kBf16 = EpilogueKind::kBf16;
  if (c.num_stages == 4 && c.cluster_m == 1)
    return launch_config<128, 256, 4, 1, kBf16>(params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  if (c.num_stages == 4 && c.cluster_m == 2)
    return launch_config<128, 256, 4, 2, kBf16>(params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  SYMMOE_FAIL("gemm", "no compiled kernel for ", c.to_string());
}

}  // namespace symmoe::gemm::kernel
