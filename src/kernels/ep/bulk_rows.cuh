// Dispatch's row mover: one warp's token rows go global -> shared -> every destination (local or peer) with 1-D
// bulk copies (the TMA engine), in pieces of kBulkStageBytes through a ring of kBulkStages shared-memory stages.
// Loads run kBulkAhead pieces ahead of the piece being stored, and they start at kernel entry (the warp's token
// range is known before counting), so a small batch's row loads hide behind the count exchange and barrier.
// Why: with register copies (common.cuh) each warp waits for its stores to issue before it loads the next token,
// so stalled remote stores hold up the local copies (docs/notes/ep.md). Here lane 0 hands whole pieces to the TMA
// engine and moves on; local and remote stores of a piece drain independently (faster than register copies at 512
// and 8192 tokens, equal at 128: docs/notes/ep.md).
// Protocol (lane 0 issues every bulk operation, so one thread's bulk groups track every stage):
//   piece n -> stage n % S, its load completes on bars[n % S] (phase n / S); after the stores of piece n are
//   committed (group n) the load of piece n + A reuses the stage of piece n + A - S, whose group must have
//   finished reading: at most S - A groups may still be reading (bulk_wait_group_read<S - A>).
// finish(): every issued load consumed or waited for, every store complete, then the async-proxy fence: the
// caller's release (signal_arrivals) then publishes the rows to the destinations.
// NOTES: shared memory bulk_pipe_bytes() (~12 KB) per warp; rows and offsets are multiples of 16 bytes.
#pragma once

#include "kernels/ep/common.cuh"
#include "kernels/ptx/bulk.cuh"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/sync.cuh"

namespace symmoe::ep {

constexpr int kBulkStages = 3;
constexpr int kBulkAhead = 2;  // pieces whose loads are in flight ahead of the piece being stored
constexpr uint32_t kBulkStageBytes = 4096;
static_assert(kBulkAhead >= 1 && kBulkAhead < kBulkStages, "the stage of the next load must be free");

// Per warp: stages, then barriers; a multiple of 128 bytes so every warp's stages stay 16-byte aligned.
__host__ __device__ constexpr size_t bulk_pipe_bytes() {
  return (size_t(kBulkStages) * (kBulkStageBytes + 8) + 127) / 128 * 128;
}

// True when scale rows of `bytes` can ride in the pipe (one piece after the x pieces); else the caller copies them.
__host__ __device__ constexpr bool bulk_scale_rows(int bytes) {
  return bytes > 0 && bytes % 16 == 0 && bytes <= int(kBulkStageBytes);
}

struct BulkRowPipe {
  uint8_t* stages;  // [kBulkStages][kBulkStageBytes]
  uint64_t* bars;   // [kBulkStages]
  const uint8_t* x;
  const uint8_t* sf;  // nullptr: no scale piece
  uint32_t x_bytes, sf_bytes;
  int x_pieces, pieces_per_row, first_token, total, loaded, stored;

  // Whole warp. smem: this warp's bulk_pipe_bytes(); the x rows (and, when bulk_scale_rows(sf_row_bytes), the
  // scale rows) of tokens [begin, end) will be pushed in order, one push_row per token.
  __device__ __forceinline__ void start(uint8_t* smem, const uint8_t* x_rows, uint32_t x_row_bytes,
                                        const uint8_t* sf_rows, int sf_row_bytes, int begin, int end) {
    stages = smem;
    bars = reinterpret_cast<uint64_t*>(smem + size_t(kBulkStages) * kBulkStageBytes);
    x = x_rows;
    x_bytes = x_row_bytes;
    sf = bulk_scale_rows(sf_row_bytes) && reinterpret_cast<uintptr_t>(sf_rows) % 16 == 0 ? sf_rows : nullptr;
    sf_bytes = sf ? uint32_t(sf_row_bytes) : 0u;
    x_pieces = int((x_bytes + kBulkStageBytes - 1) / kBulkStageBytes);
    pieces_per_row = x_pieces + (sf ? 1 : 0);
    first_token = begin;
    total = (end - begin) * pieces_per_row;
    stored = 0;
    loaded = min(kBulkAhead, total);
    if (lane_id() == 0) {
      for (int s = 0; s < kBulkStages; ++s) ptx::mbarrier_init(bars + s, 1);
      ptx::fence_mbarrier_init_cluster();  // the inits before the async proxy's complete_tx
      for (int n = 0; n < loaded; ++n) issue_load(n);
    }
    __syncwarp();
  }

  // Piece `piece` of a token: byte offset in its row (x pieces) or 0 (the scale piece), and its size.
  __device__ __forceinline__ uint32_t piece_offset(int piece) const {
    return piece < x_pieces ? uint32_t(piece) * kBulkStageBytes : 0u;
  }
  __device__ __forceinline__ uint32_t piece_bytes(int piece) const {
    return piece < x_pieces ? min(kBulkStageBytes, x_bytes - piece_offset(piece)) : sf_bytes;
  }

  // Lane 0.
  __device__ __forceinline__ void issue_load(int n) {
    const int s = n % kBulkStages, piece = n % pieces_per_row;
    const int64_t t = first_token + n / pieces_per_row;
    const uint8_t* row = piece < x_pieces ? x + t * x_bytes : sf + t * sf_bytes;
    const uint32_t bytes = piece_bytes(piece);
    ptx::mbarrier_arrive_expect_tx(bars + s, bytes);
    ptx::bulk_load_global_to_shared(stages + size_t(s) * kBulkStageBytes, row + piece_offset(piece), bytes, bars + s);
  }

  // Whole warp: the next token's x row (and scale row) to every destination held by the lanes of dst_mask (lane
  // j's x_dst / sf_dst: the rows' first bytes there); dst_mask 0 consumes the rows.
  __device__ __forceinline__ void push_row(uint8_t* x_dst, uint8_t* sf_dst, uint32_t dst_mask) {
    for (int piece = 0; piece < pieces_per_row; ++piece) {
      const int s = stored % kBulkStages;
      const uint32_t off = piece_offset(piece), bytes = piece_bytes(piece);
      uint8_t* dst = piece < x_pieces ? x_dst : sf_dst;
      if (lane_id() == 0) ptx::mbarrier_wait_parity(bars + s, uint32_t(stored / kBulkStages) & 1u);
      for (uint32_t rest = dst_mask; rest; rest &= rest - 1) {
        auto* d = reinterpret_cast<uint8_t*>(
            __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(dst), __ffs(rest) - 1));
        if (lane_id() == 0) ptx::bulk_store_shared_to_global(d + off, stages + size_t(s) * kBulkStageBytes, bytes);
      }
      if (lane_id() == 0) ptx::bulk_commit_group();
      ++stored;
      if (loaded < total) {
        if (lane_id() == 0) {
          ptx::bulk_wait_group_read<kBulkStages - kBulkAhead>();
          issue_load(loaded);
        }
        ++loaded;
      }
    }
  }

  // Whole warp, once, on every path (also when nothing was pushed): no bulk operation of this warp is left in
  // flight, and the rows stored are visible to the caller's release.
  __device__ __forceinline__ void finish() {
    if (lane_id() == 0) {
      for (int n = stored; n < loaded; ++n)
        ptx::mbarrier_wait_parity(bars + n % kBulkStages, uint32_t(n / kBulkStages) & 1u);
      ptx::bulk_wait_group<0>();
      ptx::fence_proxy_async_global();
    }
    __syncwarp();
  }
};

}  // namespace symmoe::ep
