// Optional timeline of one fused-kernel call (MegaMoe::set_trace): per CTA, %globaltimer stamps at the stage
// boundaries of src/kernels/mega/mega_kernel.cuh, two sums and the stamps of its first tiles. For `symmoe bench moe
// --trace`: it shows where a call's time goes (which stage waits on which), measured, instead of guessed. Off (a null
// pointer) by default; on, it adds a handful of global stores per CTA. Internal: the kernel writes it (trace.cuh),
// the bench and the GPU tests read it; not part of the installed API.
#pragma once

namespace symmoe::mega {

enum TracePoint : int {
  kTraceStart,           // kernel entry (thread 0)
  kTracePublished,       // count_and_publish done (thread 0's share)
  kTraceCounted,         // rank barrier #1 passed and the expert counts loaded
  kTracePullDone,        // last dispatch warp of the CTA done pulling (max over the warps)
  kTraceProducerDone,    // the TMA producer issued its last load
  kTraceMathDone,        // the math warpgroups finished their last tile (thread 0)
  kTraceGridSynced,      // every CTA of the rank is done with its roles
  kTraceCombineStart,    // rank barrier #2 passed
  kTraceEnd,             // combine done (thread 0)
  kTraceProducerWaitNs,  // sum over the CTA's tiles of the producer's wait for the tile's inputs (ns, not a stamp)
  kTraceNumTiles,        // tiles the CTA ran (count, not a stamp; the producer's index of its tile records)
  kNumTracePoints
};

// After the points: the CTA's first kTraceTileSlots tiles, kTraceTileWords each: from the producer thread [it starts
// waiting for the tile's rows, the rows are there, it issued the tile's last load (the math warps had freed all but
// kNumStages stages by then), the tile's id (trace_tile_id)], then from math thread 0 [its mainloop is done, its
// epilogue is done].
constexpr int kTraceTileSlots = 8, kTraceTileWords = 6;
enum TraceTileWord : int {
  kTileWaitStart,
  kTileInputsReady,
  kTileLoadsIssued,
  kTileId,
  kTileMainloopDone,
  kTileMathDone
};
// kTileId: bit 0 L2 tile, bits 1-15 local expert, bits 16-31 n-block, bits 32-63 pool block.
constexpr unsigned long long trace_tile_id(bool l2, int local_expert, int n_block, int pool_block) {
  return (l2 ? 1ull : 0ull) | (unsigned long long)(local_expert) << 1 | (unsigned long long)(n_block) << 16 |
         (unsigned long long)(pool_block) << 32;
}
constexpr int kTraceWordsPerCta = kNumTracePoints + kTraceTileSlots * kTraceTileWords;

constexpr const char* kTracePointNames[kNumTracePoints] = {
    "start",       "published",     "counted", "pull_done",        "producer_done", "math_done",
    "grid_synced", "combine_start", "end",     "producer_wait_ns", "num_tiles"};

}  // namespace symmoe::mega
