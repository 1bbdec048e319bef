// Synthetic expert weights: one definition (SYMMOE_HD) shared by the GPU fill kernel and the host, which can re-run
// it for any ONE expert (the golden model of a sampled token needs only that token's experts: no gigabytes of
// CPU-generated weights are uploaded). The layers need only symmoe/weight_store.hpp (MoeRankWeights, MoeWeightStore);
// this header is for the code that generates or checks synthetic weights (the store, the CLI, tests).
//
// Definition:
//   code(matrix, row, col) = e4m3(448 * u), u uniform in [-1, 1) from a counter hash of (seed, expert, matrix,
//   row, col); block scale(matrix, row/128, col/128) = sqrt(3 / fan_in) / 448 * (0.5 + v), v uniform in [0, 1)
//   from the hash of (seed, expert, matrix + 2, block row, block col). fan_in = H for W1, I for W2, so a weight has
//   variance ~1/fan_in (as ref::make_random_expert). Rows/cols are in the ORIGINAL layout (W1 rows 0..I-1 gate,
//   I..2I-1 up); the GPU fill applies the L1 interleave as it writes.
// FP4 synthetic weights (host_expert_fp4; MoeWeightStore::synthetic_fp4 generates them on the host and uploads them
// through the FP4 transform): packed E2M1 byte b of row r of a matrix = byte b % 8 (little-endian) of
// mix64(key ^ (r << 32 | b / 8)), key = stream_key(seed, expert, matrix + 4), so every nibble is uniform over the
// 16 E2M1 codes; the UE8M0 code of (row r, 32-column block j) = fp4_base_code(fan_in) + d, d in {-1, 0, 1} =
// int(3 * unit(stream_key(seed, expert, matrix + 6), r, j)) - 1. fp4_base_code puts the variance near 1/fan_in
// (E2M1 codes have mean square 8.5625); the codes of a block span 3 binades, inside the fold's exact range.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "symmoe/common.hpp"
#include "symmoe/formats.hpp"
#include "symmoe/reference/fp4.hpp"
#include "symmoe/reference/mlp.hpp"
#include "symmoe/shape.hpp"
#include "symmoe/weight_store.hpp"

namespace symmoe {

namespace synthetic {

enum Matrix : int { kW1 = 0, kW2 = 1 };

SYMMOE_HD uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// Key of one (seed, expert, stream) so the per-element hash is a single mix64.
SYMMOE_HD uint64_t stream_key(uint64_t seed, int expert, int stream) {
  return mix64(mix64(seed) ^ (uint64_t(uint32_t(expert)) << 8) ^ uint64_t(uint32_t(stream)));
}
// Uniform in [0, 1) with 24 bits.
SYMMOE_HD float unit(uint64_t key, int row, int col) {
  const uint64_t h = mix64(key ^ ((uint64_t(uint32_t(row)) << 32) | uint32_t(col)));
  return float(uint32_t(h >> 40)) * 0x1.0p-24f;
}
SYMMOE_HD uint8_t weight_code(uint64_t key, int row, int col) {
  return fmt::float_to_e4m3(448.f * (2.f * unit(key, row, col) - 1.f));
}
// key from stream_key(seed, expert, matrix + 2); fan_in_scale = sqrt(3 / fan_in) / 448 (host-computed once).
SYMMOE_HD float block_scale(uint64_t scale_key, int block_row, int block_col, float fan_in_scale) {
  return fan_in_scale * (0.5f + unit(scale_key, block_row, block_col));
}
inline float fan_in_scale(int fan_in) { return float(std::sqrt(3.0 / double(fan_in)) / 448.0); }

// The same expert on the host, ORIGINAL layout (W1 [2I, H] gate rows then up rows; W2 [H, I]).
ref::ExpertWeights host_expert(int hidden, int intermediate, int expert, uint64_t seed);
// Every expert some token of `routings` routes to, generated on `num_threads` host threads.
ref::ExpertWeightMap host_experts(int hidden, int intermediate, const std::vector<ref::Routing>& routings,
                                  uint64_t seed, int num_threads = 0);

// FP4 (see the definition above): the UE8M0 code of the middle binade, 127 + round(log2(1 / sqrt(8.5625 * fan_in))).
int fp4_base_code(int fan_in);
// One FP4 expert on the host, ORIGINAL layout (W1 [2I, H] gate rows then up rows; W2 [H, I]).
ref::ExpertWeightsFp4 host_expert_fp4(int hidden, int intermediate, int expert, uint64_t seed);

}  // namespace synthetic

// Host check of one FP4 expert for `shape` (what MoeWeightStore::from_host_fp4 runs on every expert before it
// allocates): W1 [2I, H] and W2 [H, I] with their data and scale-code sizes, every 128 x 128 scale block within the
// fold's exact range (fp4_fold.hpp). Throws symmoe::Error naming the expert, the matrix, expected and got.
void check_expert_fp4(const MoeShape& shape, int expert, const ref::ExpertWeightsFp4& w);

// Launches the synthetic fill of local experts [first_expert, first_expert + num_experts) into `w` on `stream`
// (current device). src/kernels/moe/synthetic_weights.cu.
void launch_synthetic_weights(const MoeShape& shape, int first_expert, int num_experts, uint64_t seed, uint8_t* w1,
                              float* w1_scales, uint8_t* w2, float* w2_scales, cudaStream_t stream);

}  // namespace symmoe
