// Compiled configurations of the grouped GEMM with the bf16 epilogue (64-row and 128x128 tiles), and the
// dispatcher over all compiled configurations.
#include "kernels/gemm/launch.cuh"

namespace symmoe::gemm::kernel {

// Defined in grouped_gemm_bf16_wide.cu and grouped_gemm_swiglu.cu.
void launch_bf16_wide(const KernelConfig& c, const GemmParams& params, const CUtensorMap& tmap_a,
                      const CUtensorMap& tmap_sfa, const CUtensorMap& tmap_b, int num_ctas, cudaStream_t stream);
void launch_swiglu(const KernelConfig& c, const GemmParams& params, const CUtensorMap& tmap_a,
                   const CUtensorMap& tmap_sfa, const CUtensorMap& tmap_b, int num_ctas, cudaStream_t stream);

std::string KernelConfig::to_string() const {
  return "GemmKernel{block " + std::to_string(block_m) + "x" + std::to_string(block_n) + "x128, stages " +
         std::to_string(num_stages) + ", cluster " + std::to_string(cluster_m) + ", epilogue " +
         (epilogue == EpilogueKind::kBf16 ? "bf16" : "swiglu_fp8") + "}";
}

KernelConfig compiled_config(int block_m, int block_n, EpilogueKind epilogue, int cluster_m) {
  const bool shape_ok = (block_m == 128 && (block_n == 128 || block_n == 256)) || (block_m == 64 && block_n == 256);
  SYMMOE_CHECK(shape_ok, "gemm", "block_m x block_n must be 128x128, 128x256 or 64x256, got ", block_m, "x", block_n);
  SYMMOE_CHECK(epilogue == EpilogueKind::kBf16 || block_n == 256, "gemm",
               "the SwiGLU epilogue needs block_n 256 (128 intermediate channels), got ", block_n);
  SYMMOE_CHECK(cluster_m == 1 || cluster_m == 2, "gemm", "cluster_m must be 1 or 2, got ", cluster_m);
  KernelConfig c;
  c.block_m = block_m;
  c.block_n = block_n;
  c.num_stages = block_n == 128 ? 6 : block_m == 64 ? 5 : 4;  // as many as fit in 227 KiB
  c.cluster_m = cluster_m;
  c.epilogue = epilogue;
  return c;
}

void launch_grouped_gemm(const KernelConfig& c, const GemmParams& params, const CUtensorMap& tmap_a,
                         const CUtensorMap& tmap_sfa, const CUtensorMap& tmap_b, int num_ctas, cudaStream_t stream) {
  SYMMOE_CHECK(num_ctas > 0 && num_ctas % c.cluster_m == 0, "gemm", "num_ctas must be a positive multiple of ",
               c.cluster_m, ", got ", num_ctas);
  if (c.epilogue == EpilogueKind::kSwigluFp8) return launch_swiglu(c, params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  if (c.block_m == 128 && c.block_n == 256) return launch_bf16_wide(c, params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  constexpr auto kBf16 = EpilogueKind::kBf16;
  if (c.block_m == 128 && c.block_n == 128 && c.num_stages == 6 && c.cluster_m == 1)
    return launch_config<128, 128, 6, 1, kBf16>(params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  if (c.block_m == 128 && c.block_n == 128 && c.num_stages == 6 && c.cluster_m == 2)
    return launch_config<128, 128, 6, 2, kBf16>(params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  if (c.block_m == 64 && c.block_n == 256 && c.num_stages == 5 && c.cluster_m == 1)
    return launch_config<64, 256, 5, 1, kBf16>(params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  if (c.block_m == 64 && c.block_n == 256 && c.num_stages == 5 && c.cluster_m == 2)
    return launch_config<64, 256, 5, 2, kBf16>(params, tmap_a, tmap_sfa, tmap_b, num_ctas, stream);
  SYMMOE_FAIL("gemm", "no compiled kernel for ", c.to_string());
}

}  // namespace symmoe::gemm::kernel
