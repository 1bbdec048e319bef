// The weight-streaming kernel of `symmoe bench stream` (contract: bench/stream_kernel.hpp) and its launches.
#include "stream_kernel.hpp"

#include <algorithm>
#include <utility>

#include "gemm/tensor_map.hpp"
#include "kernels/gemm/smem_layout.hpp"
#include "kernels/ptx/bulk.cuh"
#include "kernels/ptx/tma.cuh"
#include "symmoe/cuda_check.hpp"

namespace symmoe::bench {
namespace {

constexpr int kBlockK = 128;  // bytes per weight row per stage (the 128B swizzle span)
constexpr int kActRows = 64;  // the fused kernel's BLOCK_M
constexpr int kNumConsumerWarps = 8;
constexpr int kNumThreads = 128 * 3;  // warpgroups 0-1 consume, warpgroup 2 produces (as the GEMM kernels)

// Shared memory: the weight boxes [kNumStages], the activation boxes [kNumStages] (kWithA), full[kNumStages],
// empty[kNumStages]. Boxes 1024-byte aligned (128B swizzle).
template <int kBoxRows, int kNumStages, bool kWithA>
struct StreamSmem {
  static constexpr int kWBytes = kBoxRows * kBlockK;
  static constexpr int kABytes = kWithA ? kActRows * kBlockK : 0;
  static constexpr int kAOffset = kNumStages * kWBytes;
  static constexpr int kBarrierOffset = kAOffset + kNumStages * kABytes;
  static constexpr int kDynamicBytes = kBarrierOffset + 2 * kNumStages * 8 + 1024;  // + slack to align the base
  static constexpr uint32_t kStageTxBytes = kWBytes + kABytes;
  static_assert(kDynamicBytes <= 232448, "shared memory over the 227 KiB per-block limit: fewer stages");
  uint8_t* base;
  __device__ uint8_t* w(int s) const { return base + s * kWBytes; }
  __device__ uint8_t* a(int s) const { return base + kAOffset + s * kABytes; }
  __device__ uint64_t* full(int s) const { return reinterpret_cast<uint64_t*>(base + kBarrierOffset) + s; }
  __device__ uint64_t* empty(int s) const { return full(kNumStages + s); }
};

template <StreamLayout kLayout, int kBoxRows, int kNumStages, bool kWithA>
__global__ void __launch_bounds__(kNumThreads)
    tma_stream_kernel(const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap a_map,
                      const StreamProblem p, int num_tiles, uint32_t hold_cycles, uint32_t* sink) {
  using Smem = StreamSmem<kBoxRows, kNumStages, kWithA>;
  extern __shared__ uint8_t smem_raw[];
  const Smem smem{smem_raw + ((1024 - (ptx::smem_addr(smem_raw) & 1023)) & 1023)};
  const int num_k_blocks = p.k / kBlockK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kNumStages; ++s) {
      ptx::mbarrier_init(smem.full(s), 1);
      ptx::mbarrier_init(smem.empty(s), kNumConsumerWarps);
    }
    ptx::fence_mbarrier_init_cluster();
  }
  __syncthreads();
  gemm::kernel::PipelineState<kNumStages> pipe;
  if (threadIdx.x == 2 * 128) {  // the producer
    if constexpr (kLayout != StreamLayout::kTiledBulk) ptx::prefetch_tensormap(&w_map);
    if constexpr (kWithA) ptx::prefetch_tensormap(&a_map);
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
      const int row = tile * kBoxRows;
      for (int kb = 0; kb < num_k_blocks; ++kb) {
        ptx::mbarrier_wait_parity(smem.empty(pipe.stage), pipe.phase ^ 1);
        uint64_t* full = smem.full(pipe.stage);
        ptx::mbarrier_arrive_expect_tx(full, Smem::kStageTxBytes);
        if constexpr (kWithA)
          ptx::tma_load_2d(smem.a(pipe.stage), &a_map, full, kb * kBlockK, row / p.rows_per_expert * kActRows);
        const size_t box = size_t(tile) * num_k_blocks + kb;  // tiled layouts: the box's place in the stream
        if constexpr (kLayout == StreamLayout::kKMajor)
          ptx::tma_load_2d(smem.w(pipe.stage), &w_map, full, kb * kBlockK, row);
        else if constexpr (kLayout == StreamLayout::kTiledTma)
          ptx::tma_load_2d(smem.w(pipe.stage), &w_map, full, 0, int32_t(box * kBoxRows));
        else
          ptx::bulk_load_global_to_shared(smem.w(pipe.stage), p.weights + box * Smem::kWBytes, Smem::kWBytes, full);
        pipe.advance();
      }
    }
  } else if (threadIdx.x < 2 * 128) {  // the consumer warps
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint32_t fold = 0;
    for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x)
      for (int kb = 0; kb < num_k_blocks; ++kb) {
        ptx::mbarrier_wait_parity(smem.full(pipe.stage), pipe.phase);
        if (lane == 0) fold ^= reinterpret_cast<const uint32_t*>(smem.w(pipe.stage))[warp];
        if (hold_cycles > 0) {
          const long long start = clock64();
          while (clock64() - start < hold_cycles) {
          }
        }
        __syncwarp();
        if (lane == 0) ptx::mbarrier_arrive(smem.empty(pipe.stage));
        pipe.advance();
      }
    if (fold == 0x9e3779b9u) *sink = fold;  // never in practice; keeps the reads
  }
}

template <int kIndex>
void launch_entry(const StreamKernel& k, uint32_t hold_cycles, uint32_t* sink, cudaStream_t stream) {
  constexpr StreamConfig c = kStreamConfigs[kIndex];
  constexpr int kSmemBytes = StreamSmem<c.box_rows, c.stages, c.with_a>::kDynamicBytes;
  tma_stream_kernel<c.layout, c.box_rows, c.stages, c.with_a>
      <<<k.grid, kNumThreads, kSmemBytes, stream>>>(k.w_map, k.a_map, k.problem, k.num_tiles, hold_cycles, sink);
  SYMMOE_CUDA_CHECK_LAUNCH("tma_stream_kernel");
}

// cudaFuncSetAttribute (the shared memory) and the occupancy of entry kIndex.
template <int kIndex>
void set_up_entry(StreamKernel& k) {
  constexpr StreamConfig c = kStreamConfigs[kIndex];
  constexpr int kSmemBytes = StreamSmem<c.box_rows, c.stages, c.with_a>::kDynamicBytes;
  auto* kernel = tma_stream_kernel<c.layout, c.box_rows, c.stages, c.with_a>;
  SYMMOE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  SYMMOE_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.resident_ctas_per_sm, kernel, kNumThreads, kSmemBytes));
  k.smem_bytes = kSmemBytes;
  k.launch_fn = launch_entry<kIndex>;
}

template <size_t... kIndex>
void set_up(int index, StreamKernel& k, std::index_sequence<kIndex...>) {
  ((int(kIndex) == index ? set_up_entry<int(kIndex)>(k) : void()), ...);
}

}  // namespace

const char* stream_layout_name(StreamLayout layout) {
  switch (layout) {
    case StreamLayout::kKMajor:
      return "kmajor";
    case StreamLayout::kTiledTma:
      return "tiled_tma";
    case StreamLayout::kTiledBulk:
      return "tiled_bulk";
  }
  return "?";
}

void check_stream_problem(const StreamProblem& p) {
  SYMMOE_CHECK(p.rows_per_expert % 256 == 0, "bench", "--n (rows per expert) must be a multiple of 256, got ",
               p.rows_per_expert);
  SYMMOE_CHECK(p.k % kBlockK == 0, "bench", "--k must be a multiple of 128, got ", p.k);
  SYMMOE_CHECK(p.weight_bytes() / kBlockK < (size_t(1) << 31), "bench", "--experts x --n x --k = ", p.weight_bytes(),
               " bytes: at most 2^38 (the tiled tensor map's row coordinate, bytes / 128, is an int32)");
}

StreamKernel prepare_stream_kernel(int index, const StreamProblem& p, bool whole_waves) {
  SYMMOE_CHECK(index >= 0 && index < kNumStreamConfigs, "bench", "stream configuration ", index, " out of [0, ",
               kNumStreamConfigs, ")");
  check_stream_problem(p);
  StreamKernel k;
  k.config = kStreamConfigs[index];
  k.problem = p;
  const StreamConfig& c = k.config;
  const uint64_t rows = uint64_t(p.experts) * p.rows_per_expert;
  if (c.layout == StreamLayout::kKMajor)
    k.w_map = gemm::make_tensor_map_2d(p.weights, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.k, rows, p.k, kBlockK, c.box_rows,
                                       true, "stream weights (kmajor)");
  else if (c.layout == StreamLayout::kTiledTma)
    k.w_map = gemm::make_tensor_map_2d(p.weights, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, kBlockK, p.weight_bytes() / kBlockK,
                                       kBlockK, kBlockK, c.box_rows, true, "stream weights (tiled)");
  if (c.with_a)
    k.a_map = gemm::make_tensor_map_2d(p.act, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.k, uint64_t(p.experts) * kActRows,
                                       p.k, kBlockK, kActRows, true, "stream activations");
  set_up(index, k, std::make_index_sequence<kNumStreamConfigs>());
  int device = 0, sms = 0;
  SYMMOE_CUDA_CHECK(cudaGetDevice(&device));
  SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int num_tiles = int(rows / c.box_rows);
  k.grid = std::min(c.ctas_per_sm * sms, num_tiles);
  k.num_tiles = whole_waves ? num_tiles / k.grid * k.grid : num_tiles;
  return k;
}

}  // namespace symmoe::bench
