// Persistent tile scheduler of the grouped GEMM: walks experts in order, and within an expert the n-blocks
// (outer) and m-blocks (inner), so the CTAs running at one time share weight tiles (B) through L2.
//
// Clusters of kClusterM CTAs work on one "cluster tile": kClusterM consecutive m-blocks of the same n-block; CTA
// rank r takes m-block kClusterM * mc + r. Both CTAs always take the same number of tiles (the B tile is
// multicast to both), so a CTA whose m-block lies past the expert's rows still runs the pipeline with
// num_rows == 0 and stores nothing.
// NOTES: the producer warp and the math warpgroups each run their own copy; they agree because the walk is a
// pure function of (blockIdx, the row counts). Cost: one pass over the experts per CTA (E loads, L2-resident).
#pragma once

#include "kernels/gemm/params.hpp"
#include "kernels/ptx/cluster.cuh"

namespace symmoe::gemm::kernel {

struct Tile {
  int expert_idx;
  int row_begin;  // first global row of this CTA's BLOCK_M rows
  int num_rows;   // valid rows in this block (0 .. BLOCK_M); rows past it are computed, never stored
  int n_begin;    // first output column
};

// The grid is the persistent cluster grid: cluster blockIdx.x / kClusterM of gridDim.x / kClusterM. The grid and the
// CTA's rank in its cluster are read from special registers when needed, so the scheduler keeps no registers for
// them across a tile's K loop.
template <int BLOCK_M, int BLOCK_N, int kClusterM>
struct TileScheduler {
  const GemmParams& params;
  int expert_idx = -1;
  int expert_tile_end = 0, expert_tile_begin = 0;
  int expert_row_begin = 0, expert_rows = 0, num_m_clusters = 0;
  int next_tile;

  __device__ explicit TileScheduler(const GemmParams& p) : params(p), next_tile(int(blockIdx.x) / kClusterM) {}
  __device__ static int cta_rank() {
    if constexpr (kClusterM == 1)
      return 0;
    else
      return int(ptx::cluster_cta_rank());
  }

  // A partial last n-block (n % BLOCK_N == 128 with BLOCK_N = 256) is computed whole; its second warpgroup
  // stores nothing (epilogue_bf16 checks the column).
  __device__ int num_n_blocks() const { return (params.n + BLOCK_N - 1) / BLOCK_N; }

  __device__ void load_expert_rows(int e) {
    if (params.max_m > 0) {
      expert_row_begin = e * params.max_m;
      expert_rows = min(max(params.num_valid_rows[e], 0), params.max_m);
    } else {
      expert_row_begin = params.segment_starts[e];
      const int segment = params.segment_starts[e + 1] - expert_row_begin;
      expert_rows = params.num_valid_rows ? min(max(params.num_valid_rows[e], 0), segment) : segment;
    }
  }

  // Next tile of this CTA; false when all experts are done.
  __device__ bool next(Tile& tile) {
    const int t = next_tile;
    while (t >= expert_tile_end) {
      if (++expert_idx >= params.num_experts) return false;
      load_expert_rows(expert_idx);
      num_m_clusters = (expert_rows + BLOCK_M * kClusterM - 1) / (BLOCK_M * kClusterM);
      expert_tile_begin = expert_tile_end;
      expert_tile_end += num_m_clusters * num_n_blocks();
    }
    next_tile += int(gridDim.x) / kClusterM;
    const int local = t - expert_tile_begin;
    const int m_block = (local % num_m_clusters) * kClusterM + cta_rank();
    tile.expert_idx = expert_idx;
    tile.row_begin = expert_row_begin + m_block * BLOCK_M;
    tile.num_rows = min(max(expert_rows - m_block * BLOCK_M, 0), BLOCK_M);
    tile.n_begin = (local / num_m_clusters) * BLOCK_N;
    return true;
  }
};

}  // namespace symmoe::gemm::kernel
