// GPU timing shared by `symmoe run` and the benches (`symmoe bench <name>`).
//   median_time_us           CUDA events around each repetition of work enqueued on one stream.
//   graph_time_all_ranks_us  collective multi-rank work (every local rank's stream of one Communicator): `calls`
//                            calls of fn are captured into one CUDA graph per rank stream and the graphs are launched
//                            together; CUDA events on the first local rank's stream time each replay (its last kernel
//                            ends after the last cross-rank barrier of the collective, so its time is the
//                            collective's). Host launch overhead stays out, as in a captured serving loop.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "symmoe/runtime.hpp"

namespace symmoe::cli {

// Median time in microseconds of `fn` enqueued on `stream`, timed with CUDA events around each repetition.
// `fn` must enqueue work only (no host sync). Warm-up repetitions are not timed.
double median_time_us(cudaStream_t stream, const std::function<void()>& fn, int warmup = 5, int reps = 50);

// Median microseconds of ONE call of fn (fn launches every local rank; no host sync inside).
double graph_time_all_ranks_us(Communicator& comm, const std::function<void()>& fn, int calls, int reps);

}  // namespace symmoe::cli
