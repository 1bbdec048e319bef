// Persistent tile scheduler of the grouped GEMM: walks experts in order, and within an expert the n-blocks
// (outer) and m-blocks (inner), so the CTAs running at one time share weight tiles (B) through L2.
//
// Clusters of kClusterM CTAs work on one "cluster tile" and always take the same number of tiles (their producers
// release each other's stages, so their pipelines run in step):
//   shared B     kClusterM consecutive m-blocks of the same n-block (CTA rank r takes m-block kClusterM * mc + r);
//                each CTA loads 1 / kClusterM of the B tile and multicasts it to all (producer.cuh);
//   own B        the m-block an odd count leaves past an expert's whole clusters is paired along N instead: CTA r
//                takes n-block kClusterM * j + r of that m-block and loads its own B tile.
//                A rank whose n-block lies past n (an odd n-block count) runs the pipeline with num_rows == 0 and
//                stores nothing.
// So no CTA runs an empty tile beside a partner's m-block, whatever the experts' row counts.
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
  bool shares_b;  // clusters: the cluster's CTAs work on this n-block and multicast its B tile (false: own B tile)
};

// The grid is the persistent cluster grid: cluster blockIdx.x / kClusterM of gridDim.x / kClusterM. The grid and the
// CTA's rank in its cluster are read from special registers when needed, so the scheduler keeps no registers for
// them across a tile's K loop.
template <int BLOCK_M, int BLOCK_N, int kClusterM>
struct TileScheduler {
  static_assert(kClusterM == 1 || kClusterM == 2, "at most one m-block is left past an expert's whole clusters");
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
      const int num_m_blocks = (expert_rows + BLOCK_M - 1) / BLOCK_M;
      num_m_clusters = num_m_blocks / kClusterM;
      expert_tile_begin = expert_tile_end;
      expert_tile_end += num_m_clusters * num_n_blocks();
      // The m-block left past the whole clusters: its n-blocks taken kClusterM at a time (own B).
      if (num_m_blocks % kClusterM != 0) expert_tile_end += (num_n_blocks() + kClusterM - 1) / kClusterM;
    }
    next_tile += int(gridDim.x) / kClusterM;
    const int local = t - expert_tile_begin;
    int m_block, n_block;
    bool past_n = false;
    if (kClusterM == 1 || local < num_m_clusters * num_n_blocks()) {
      m_block = (local % num_m_clusters) * kClusterM + cta_rank();
      n_block = local / num_m_clusters;
      tile.shares_b = kClusterM > 1;
    } else {
      m_block = num_m_clusters * kClusterM;
      n_block = (local - num_m_clusters * num_n_blocks()) * kClusterM + cta_rank();
      past_n = n_block >= num_n_blocks();
      if (past_n) n_block = num_n_blocks() - 1;  // a valid block for the B-scale reads; nothing is stored
      tile.shares_b = false;
    }
    tile.expert_idx = expert_idx;
    tile.row_begin = expert_row_begin + m_block * BLOCK_M;
    tile.num_rows = past_n ? 0 : min(max(expert_rows - m_block * BLOCK_M, 0), BLOCK_M);
    tile.n_begin = n_block * BLOCK_N;
    return true;
  }
};

}  // namespace symmoe::gemm::kernel
