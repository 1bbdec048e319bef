// What the CLI checks flags and plans against: fixed bounds of the flags, and the visible GPU 0 (an H200 when no
// GPU is visible: planning on a CPU machine is planning for the GPU symmoe targets).
#pragma once

#include <cstdint>
#include <string>

#include "symmoe/layout/sync.hpp"

namespace symmoe::cli {

constexpr int kMaxRanks = int(layout::kMaxRanks);  // MoeShape::validate's bound (one NVL72 domain)
// Tokens per rank: 8192 is the largest measured batch; 2^20 keeps every row count of the plans (R * T_max * K plus
// padding) inside the kernels' 32-bit row indices at 72 ranks and top-8 (the planner checks the exact bound).
constexpr int kMaxTokensPerRank = 1 << 20;
// Zipf exponents of real routers are ~0.5-2; 10 already sends nearly every token to the same K experts.
constexpr double kMaxZipfExponent = 10.0;

struct GpuLimits {
  int num_sms;            // SMs per rank the plans may use
  uint64_t memory_bytes;  // device memory of one rank
  std::string name;       // "NVIDIA H200 (GPU 0)" or "H200 (no GPU visible: assumed)"
};

GpuLimits gpu_limits();

// "" when `bytes_per_rank` fits `limits.memory_bytes`, else a one-line warning naming both sizes.
std::string memory_warning(uint64_t bytes_per_rank, const GpuLimits& limits);

}  // namespace symmoe::cli
