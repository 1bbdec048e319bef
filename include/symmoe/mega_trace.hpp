// Optional timeline of one fused-kernel call (MegaMoe::set_trace): per CTA, %globaltimer stamps at the stage
// boundaries of src/kernels/mega/mega_kernel.cuh, two sums and the stamps of its first tiles. For `symmoe bench moe --trace`: it shows where a
// call's time goes (which stage waits on which), measured, instead of guessed. Off (a null pointer) by default; on,
// it adds a handful of global stores per CTA.
#pragma once

namespace symmoe::mega {

enum TracePoint : int {
  kTraceStart,            // kernel entry (thread 0)
  kTracePublished,        // count_and_publish done (thread 0's share)
  kTraceCounted,          // rank barrier #1 passed and the expert counts loaded
  kTracePullDone,         // last dispatch warp of the CTA done pulling (max over the warps)
  kTraceProducerDone,     // the TMA producer issued its last load
  kTraceMathDone,         // the math warpgroups finished their last tile (thread 0)
  kTraceGridSynced,       // every CTA of the rank is done with its roles
  kTraceCombineStart,     // rank barrier #2 passed
  kTraceEnd,              // combine done (thread 0)
  kTraceProducerWaitNs,   // sum over the CTA's tiles of the producer's wait for the tile's inputs (ns, not a stamp)
  kTraceNumTiles,         // tiles the CTA ran (count, not a stamp; the producer's index of its tile records)
  kNumTracePoints
};

// After the points: the CTA's first kTraceTileSlots tiles, kTraceTileWords each, all from the producer thread (the
// math warpgroups have no registers to spare): [it starts waiting for the tile's rows, the rows are there, it issued
// the tile's last load (the math warps had freed all but kNumStages stages by then), 1 for an L2 tile else 0].
constexpr int kTraceTileSlots = 4, kTraceTileWords = 4;
enum TraceTileWord : int { kTileWaitStart, kTileInputsReady, kTileLoadsIssued, kTileIsL2 };
constexpr int kTraceWordsPerCta = kNumTracePoints + kTraceTileSlots * kTraceTileWords;

constexpr const char* kTracePointNames[kNumTracePoints] = {
    "start", "published", "counted", "pull_done", "producer_done", "math_done", "grid_synced", "combine_start",
    "end", "producer_wait_ns", "num_tiles"};

}  // namespace symmoe::mega
