// Persistent tile scheduler of the grouped GEMM: walks experts in order, and within an expert the n-blocks
// (outer) and m-blocks (inner), so the CTAs running at one time share weight tiles (B) through L2.
//
// Clusters of kClusterM CTAs work on one "cluster tile": kClusterM consecutive m-blocks of the same n-block, counted
// in one flat sequence over all experts' m-blocks (expert e's ceil(rows / BLOCK_M) m-blocks follow expert e - 1's),
// so an expert with an odd m-block count leaves no empty partner: its last m-block pairs with the next expert's first
// (m-block pairing). CTA rank r takes flat m-block kClusterM * c + r of cluster c. A cluster belongs to the expert of
// its rank-0 m-block (the walk's groups). Tile::multicast says whether both m-blocks are one expert's: then each CTA
// loads half of the B tile and multicasts it to both; a pair across two experts loads its own B tiles (producer.cuh).
// Only the last cluster of all (an odd total) has a partner without rows: it runs the pipeline with num_rows == 0 on
// its group expert's B tile (multicast) and stores nothing.
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
  bool multicast =
      false;  // kClusterM 2: both CTAs' m-blocks belong to one expert (one B tile, loaded in halves, multicast)
};

// The grid is the persistent cluster grid: cluster blockIdx.x / kClusterM of gridDim.x / kClusterM. The grid and the
// CTA's rank in its cluster are read from special registers when needed, so the scheduler keeps no registers for
// them across a tile's K loop.
template <int BLOCK_M, int BLOCK_N, int kClusterM>
struct TileScheduler {
  const GemmParams& params;
  int expert_idx = -1;  // the group's expert: its m-blocks are the rank-0 m-blocks of the group's clusters
  int expert_tile_end = 0, expert_tile_begin = 0;
  int expert_row_begin = 0, expert_rows = 0, num_m_clusters = 0;
  int m_blocks_end = 0;  // flat m-blocks of the experts up to and including the group's
  int first_local = 0;   // the group's first cluster's rank-0 m-block, counted from the expert's first m-block
  // The first expert after the group's with rows (kClusterM 2, when the group's last cluster reaches into it):
  // -1 if none.
  int next_expert = -1, next_row_begin = 0, next_rows = 0;
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

  // Expert e's first global row and valid rows.
  __device__ void expert_rows_of(int e, int& row_begin, int& rows) const {
    if (params.max_m > 0) {
      row_begin = e * params.max_m;
      rows = min(max(params.num_valid_rows[e], 0), params.max_m);
    } else {
      row_begin = params.segment_starts[e];
      const int segment = params.segment_starts[e + 1] - row_begin;
      rows = params.num_valid_rows ? min(max(params.num_valid_rows[e], 0), segment) : segment;
    }
  }

  // Next tile of this CTA; false when all experts are done.
  __device__ bool next(Tile& tile) {
    const int t = next_tile;
    while (t >= expert_tile_end) {
      if (++expert_idx >= params.num_experts) return false;
      expert_rows_of(expert_idx, expert_row_begin, expert_rows);
      const int m_blocks_begin = m_blocks_end;
      m_blocks_end += (expert_rows + BLOCK_M - 1) / BLOCK_M;
      // Clusters c with kClusterM * c in [m_blocks_begin, m_blocks_end).
      const int first_cluster = (m_blocks_begin + kClusterM - 1) / kClusterM;
      num_m_clusters = (m_blocks_end + kClusterM - 1) / kClusterM - first_cluster;
      first_local = kClusterM * first_cluster - m_blocks_begin;
      expert_tile_begin = expert_tile_end;
      expert_tile_end += num_m_clusters * num_n_blocks();
      if (kClusterM > 1 && num_m_clusters > 0 && m_blocks_end % kClusterM != 0) {
        next_expert = expert_idx + 1;
        for (next_rows = 0; next_expert < params.num_experts; ++next_expert) {
          expert_rows_of(next_expert, next_row_begin, next_rows);
          if (next_rows > 0) break;
        }
        if (next_rows == 0) next_expert = -1;
      }
    }
    next_tile += int(gridDim.x) / kClusterM;
    const int local = t - expert_tile_begin;
    const int cluster_m_block = first_local + (local % num_m_clusters) * kClusterM;  // rank 0's, in the expert
    const int m_block = cluster_m_block + cta_rank();
    const bool partner_outside = cluster_m_block + kClusterM > (expert_rows + BLOCK_M - 1) / BLOCK_M;
    tile.n_begin = (local / num_m_clusters) * BLOCK_N;
    tile.multicast = !partner_outside || next_expert < 0;
    if (m_block * BLOCK_M < expert_rows || next_expert < 0) {
      tile.expert_idx = expert_idx;
      tile.row_begin = expert_row_begin + m_block * BLOCK_M;
      tile.num_rows = min(max(expert_rows - m_block * BLOCK_M, 0), BLOCK_M);
    } else {  // rank 1 of a pair across experts: the next expert's first m-block
      tile.expert_idx = next_expert;
      tile.row_begin = next_row_begin;
      tile.num_rows = min(next_rows, BLOCK_M);
    }
    return true;
  }
};

}  // namespace symmoe::gemm::kernel
