// Timing of collective multi-rank work (every rank's streams of one Communicator), shared by `symmoe bench moe` and
// `symmoe run`: `calls` calls of fn are captured into one CUDA graph per rank stream and the graphs are launched
// together; CUDA events on rank 0's stream time each replay (rank 0's last kernel ends after the last cross-rank
// barrier of the collective, so its time is the collective's). Host launch overhead stays out, as in a captured
// serving loop.
#pragma once

#include <functional>

#include "symmoe/runtime.hpp"

namespace symmoe::bench {

// Median microseconds of ONE call of fn (fn launches every local rank; no host sync inside).
double graph_time_all_ranks_us(Communicator& comm, const std::function<void()>& fn, int calls, int reps);

}  // namespace symmoe::bench
