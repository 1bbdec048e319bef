// Host-visible entry into the grouped GEMM kernels: one launcher over the compiled kernels.
// NOTES: the compiled set is plan::kGemmKernels (include/symmoe/plan.hpp), a bounded set of instantiations
// (STYLE.md 13); the host planner picks one of them, never a new one.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/gemm/params.hpp"
#include "symmoe/cuda_check.hpp"

namespace symmoe::gemm::kernel {

std::string kernel_name(const plan::GemmKernelShape& shape);

// The TMA descriptors of one launch (src/gemm/tensor_map): A, its scales, B (e4m3 [E n, k], 128B-swizzled boxes of
// 128 x block_n; FP4: packed [E n, k/2], unswizzled boxes of 64 B x block_n) and, FP4 only, B's scale codes
// (int32 [E k/128, n], boxes of block_n x 1).
// The one-batch core (plan::GemmCore::kOneBatch) also stores its output through `d`: bf16 D [rows, n] in boxes of
// 64 columns, or the SwiGLU kernel's e4m3 out [rows, n / 2] in boxes of 128 channels; 128B-swizzled, 64 rows a box.
// The swap-AB core (plan::GemmCore::kSwapAB) stores D straight to params.d (no D map).
struct GemmTensorMaps {
  CUtensorMap a, sfa, b, b_codes, d;
};

// One launch of a persistent grouped-GEMM kernel: num_ctas CTAs of `threads` threads in clusters of cluster_size,
// smem_bytes of dynamic shared memory. Every CTA must be resident at once: a cluster needs cluster_size free SMs in
// one GPC, so fewer than num_ctas / cluster_size clusters may fit (GPCs with an odd SM count), and run() cuts the
// grid to the clusters that fit rather than run the rest as a second wave.
class PersistentLaunch {
 public:
  PersistentLaunch(int num_ctas, int threads, int smem_bytes, int cluster_size, cudaStream_t stream)
      : smem_bytes_(smem_bytes), cluster_size_(cluster_size) {
    config_.gridDim = dim3(num_ctas);
    config_.blockDim = dim3(threads);
    config_.dynamicSmemBytes = smem_bytes;
    config_.stream = stream;
    attr_.id = cudaLaunchAttributeClusterDimension;
    attr_.val.clusterDim.x = cluster_size;
    attr_.val.clusterDim.y = 1;
    attr_.val.clusterDim.z = 1;
    config_.attrs = &attr_;
    config_.numAttrs = 1;
  }
  PersistentLaunch(const PersistentLaunch&) = delete;
  PersistentLaunch& operator=(const PersistentLaunch&) = delete;

  template <typename... KernelArgs, typename... Args>
  void run(void (*kernel)(KernelArgs...), const char* name, const Args&... args) {
    SYMMOE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes_));
    if (cluster_size_ > 1) {
      int max_clusters = 0;
      SYMMOE_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&max_clusters, kernel, &config_));
      if (max_clusters > 0) config_.gridDim.x = std::min<unsigned>(config_.gridDim.x, max_clusters * cluster_size_);
    }
    SYMMOE_CUDA_CHECK(cudaLaunchKernelEx(&config_, kernel, args...));
    SYMMOE_CUDA_CHECK_LAUNCH(name);
  }

 private:
  cudaLaunchConfig_t config_{};
  cudaLaunchAttribute attr_{};
  int smem_bytes_, cluster_size_;
};

// Launches `num_ctas` persistent CTAs (a multiple of the cluster size) of the compiled kernel `shape`; throws
// symmoe::Error if it is not one of plan::kGemmKernels.
void launch_grouped_gemm(const plan::GemmKernelShape& shape, const GemmParams& params, const GemmTensorMaps& maps,
                         int num_ctas, cudaStream_t stream);

// This file's share of plan::kGemmKernels (grouped_gemm_bf16.cu, grouped_gemm_bf16_wide.cu, grouped_gemm_swiglu.cu,
// grouped_gemm_fp4.cu, grouped_gemm_core.cu, grouped_gemm_swap_ab.cu): launches entry `index` and returns true if the
// file compiled it.
bool launch_bf16_narrow(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas,
                        cudaStream_t stream);
bool launch_bf16_wide(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas,
                      cudaStream_t stream);
bool launch_swiglu(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream);
bool launch_fp4(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream);
bool launch_core(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream);
bool launch_swap_ab(int index, const GemmParams& params, const GemmTensorMaps& maps, int num_ctas, cudaStream_t stream);

}  // namespace symmoe::gemm::kernel
