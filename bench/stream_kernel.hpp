// The kernel of `symmoe bench stream` (bench/stream_kernel.cu): the fused kernel's weight stream and nothing else.
// Persistent, ctas_per_sm CTAs per SM, 384 threads: warpgroup 2's first thread loads the weight tiles into a ring of
// `stages` shared-memory stages (full/empty mbarriers, as kernels/gemm/producer.cuh), the 8 warps of warpgroups 0-1
// wait on full, read one word, optionally hold the stage `hold_cycles` SM clocks, and release it (one arrive per
// warp on empty, as the math warps do).
// Weights: [experts * rows_per_expert][k] bytes. Tile t = rows [t * box_rows, (t + 1) * box_rows) (the fused kernel's
// (expert, n-block) order), walked in k/128 stages of box_rows x 128 bytes; CTA c takes tiles c, c + grid, ... of the
// first num_tiles (all, or whole waves only: every CTA the same tile count, no tail of a few busy SMs).
// Layouts of a stage's weight box (the same buffer is read in every layout; only the access pattern changes):
//   kmajor      2-D tensor map over [rows][k], box {128 B, box_rows}, 128B swizzle: box_rows pieces of 128 B, k bytes
//               apart (the fused kernel's "mega w1" map, src/mega/mega_moe.cpp);
//   tiled_tma   the bytes as if pre-arranged box by box (box (t, kb) at (t * k/128 + kb) * box bytes): a 2-D tensor
//               map over [bytes / 128][128], box {128 B, box_rows}, 128B swizzle: one contiguous piece per stage;
//   tiled_bulk  the same contiguous piece by one 1-D bulk copy (cp.async.bulk, no tensor map).
// with_a: each stage also loads the fused kernel's activation box, 64 rows x 128 B of [experts * 64][k] at the tile's
// expert (a 2-D tensor map, 128B swizzle).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace symmoe::bench {

enum class StreamLayout { kKMajor, kTiledTma, kTiledBulk };
const char* stream_layout_name(StreamLayout layout);

struct StreamConfig {
  StreamLayout layout;
  int box_rows;  // weight rows per stage (and per tile): 128 or 256
  int stages;
  bool with_a;
  int ctas_per_sm;  // the grid is ctas_per_sm x SMs (at most the tile count)
};

// Every compiled configuration (one kernel each), in the order the bench times and prints them. NOTES: 7 stages of
// 256 x 128 B is the most that fits 227 KiB per CTA; 2 CTAs per SM need <= ~113 KiB each.
inline constexpr StreamConfig kStreamConfigs[] = {
    // layout, box_rows, stages, with_a, ctas_per_sm
    {StreamLayout::kKMajor, 256, 3, false, 1},     // the fused kernel's weight box and access pattern
    {StreamLayout::kKMajor, 256, 5, false, 1},     // ... at its stage count
    {StreamLayout::kKMajor, 256, 7, false, 1},     // ... at the most stages that fit
    {StreamLayout::kKMajor, 128, 3, false, 1},     // half the box: 128 pieces of 128 B per stage
    {StreamLayout::kKMajor, 128, 5, false, 1},     // 80 KiB of stages per SM
    {StreamLayout::kKMajor, 128, 8, false, 1},     // the ring bytes of 256 x 4
    {StreamLayout::kKMajor, 128, 14, false, 1},    // the ring bytes of 256 x 7
    {StreamLayout::kTiledTma, 256, 3, false, 1},   // contiguous 32 KiB boxes, same tensor-map load
    {StreamLayout::kTiledTma, 256, 5, false, 1},   // 160 KiB of stages per SM
    {StreamLayout::kTiledTma, 256, 7, false, 1},   // 224 KiB of stages per SM
    {StreamLayout::kTiledTma, 128, 8, false, 1},   // 128 KiB of stages per SM
    {StreamLayout::kTiledBulk, 256, 3, false, 1},  // contiguous boxes by 1-D bulk copies
    {StreamLayout::kTiledBulk, 256, 5, false, 1},  // 160 KiB of stages per SM
    {StreamLayout::kTiledBulk, 256, 7, false, 1},  // 224 KiB of stages per SM
    {StreamLayout::kTiledBulk, 128, 8, false, 1},  // 128 KiB of stages per SM
    {StreamLayout::kKMajor, 256, 5, true, 1},      // the fused kernel's stage: weights + activation box
    {StreamLayout::kTiledBulk, 256, 5, true, 1},   // ... with contiguous weight boxes
    {StreamLayout::kKMajor, 256, 2, false, 2},     // 2 CTAs per SM, half the stages each
    {StreamLayout::kKMajor, 256, 3, false, 2},     // 192 KiB of stages per SM
    {StreamLayout::kTiledBulk, 256, 3, false, 2},  // 192 KiB of stages per SM
};
inline constexpr int kNumStreamConfigs = int(sizeof kStreamConfigs / sizeof kStreamConfigs[0]);

struct StreamProblem {
  const uint8_t* weights;  // [experts * rows_per_expert][k]
  const uint8_t* act;      // [experts * 64][k] (the with_a configurations)
  int experts, rows_per_expert, k;
  size_t weight_bytes() const { return size_t(experts) * rows_per_expert * k; }
  size_t act_bytes() const { return size_t(experts) * 64 * k; }
};

// One configuration ready to launch: its tensor maps, shared memory, grid and tiles.
struct StreamKernel {
  StreamConfig config;
  int smem_bytes = 0;
  int resident_ctas_per_sm = 0;  // what the occupancy calculator says fits (< ctas_per_sm: the grid runs in waves)
  int grid = 0;
  int num_tiles = 0;  // tiles streamed per launch: [0, num_tiles)
  CUtensorMap w_map{}, a_map{};
  StreamProblem problem{};
  void (*launch_fn)(const StreamKernel&, uint32_t hold_cycles, uint32_t* sink, cudaStream_t) = nullptr;
  void launch(uint32_t hold_cycles, uint32_t* sink, cudaStream_t stream) const {
    launch_fn(*this, hold_cycles, sink, stream);
  }
  size_t weight_bytes_read() const { return size_t(num_tiles) * config.box_rows * problem.k; }
};

// Throws, naming the flag, unless the problem tiles: rows_per_expert a multiple of 256, k of 128, and the tiled
// tensor map's row coordinate (bytes / 128) below 2^31.
void check_stream_problem(const StreamProblem& p);

// Configuration kStreamConfigs[index] on the current device (check_stream_problem first); whole_waves: num_tiles is
// the largest multiple of the grid within the problem's tiles.
StreamKernel prepare_stream_kernel(int index, const StreamProblem& problem, bool whole_waves);

}  // namespace symmoe::bench
