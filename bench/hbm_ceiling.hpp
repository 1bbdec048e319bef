// The same-run HBM read ceiling that `bench moe` reports weight streaming against (docs/design.md
// §10.2, hbm_ceiling_gbps): a kernel that only streams a buffer far larger than L2 and counts the bytes it read.
#pragma once

namespace symmoe::bench {

// GB/s (1e9 bytes/s) of a streaming read of `num_bytes` on the current device: median of `reps` timed passes
// (CUDA events) after one warm-up pass.
double hbm_read_ceiling_gbps(size_t num_bytes = size_t(4) << 30, int reps = 15);

}  // namespace symmoe::bench
