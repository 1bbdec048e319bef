// Host-visible entry into the grouped GEMM kernels: the set of compiled configurations and one launcher.
// NOTES: a bounded set of instantiations (STYLE.md 13); the host planner picks one of them, never a new one.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/gemm/params.hpp"

namespace symmoe::gemm::kernel {

struct KernelConfig {
  int block_m = 128, block_n = 128, num_stages = 6, cluster_m = 1;
  EpilogueKind epilogue = EpilogueKind::kBf16;
  std::string to_string() const;
};

// The compiled configuration for (block_m, block_n, epilogue, cluster_m); throws symmoe::Error if none exists.
// Compiled: bf16 128x128, 64x256, 128x256; SwiGLU 64x256, 128x256; each with cluster 1 and 2.
KernelConfig compiled_config(int block_m, int block_n, EpilogueKind epilogue, int cluster_m);

// Launches `num_ctas` persistent CTAs (a multiple of cluster_m). Tensor maps as built by src/gemm/tensor_map.
void launch_grouped_gemm(const KernelConfig& config, const GemmParams& params, const CUtensorMap& tmap_a,
                         const CUtensorMap& tmap_sfa, const CUtensorMap& tmap_b, int num_ctas, cudaStream_t stream);

}  // namespace symmoe::gemm::kernel
