// Kernel-side parameters of the fused MoE kernel (MegaMoE), filled by the host (src/mega/mega_moe.cpp).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/comm/sym_buffer.cuh"
#include "kernels/common/input_error.hpp"
#include "kernels/gemm/params.hpp"
#include "symmoe/layout/mega.hpp"
#include "kernels/mega/trace_format.hpp"
#include "symmoe/layout/sync.hpp"

namespace symmoe::mega::kernel {

// TMA descriptors of one rank (src/mega/mega_moe.cpp builds them once: pool and weights never move). One kernel
// parameter; the producer picks a phase's three maps by pointer arithmetic (l1_a + 0..2 or l2_a + 0..2), which
// keeps them out of registers and local memory.
struct MegaTensorMaps {
  CUtensorMap l1_a, l1_sfa, l1_b;  // L1 pool x [P, H], L1 pool scales [H/128, P], W1 [El * 2I, H]
  CUtensorMap l2_a, l2_sfa, l2_b;  // L2 pool x [P, I], L2 pool scales [I/128, P], W2 [El * H, I]
};
static_assert(sizeof(CUtensorMap) == 128, "MegaTensorMaps: the phase's maps are consecutive");

// Every TMA descriptor of one rank's fused layer, for either weight format: `gemm`, the maps both kernels read (the
// FP8 kernels take it alone), and the FP4 code maps. FP4 weights: gemm.l1_b / l2_b map the packed E2M1 weights
// (rows of K/2 bytes, boxes of 64 B x 256 rows, unswizzled: the math warpgroups read them to convert) and the codes
// maps the UE8M0 code words (int32 [El * K/128, N], boxes of 256 words of one K block); FP8 weights leave the code
// maps empty.
struct MegaRankMaps {
  MegaTensorMaps gemm;
  CUtensorMap l1_codes, l2_codes;  // W1 codes [El * H/128, 2I], W2 codes [El * I/128, H]
};

// The maps parameter of the fused kernel (mega_kernel.cuh): MegaTensorMaps for FP8 weights, MegaRankMaps for FP4;
// gemm_maps / code_maps read the six phase maps and the code maps (FP8: none) out of either.
template <bool kFp4>
struct MegaKernelMapsOf {
  using type = MegaTensorMaps;
};
template <>
struct MegaKernelMapsOf<true> {
  using type = MegaRankMaps;
};
template <bool kFp4>
using MegaKernelMaps = typename MegaKernelMapsOf<kFp4>::type;
__host__ __device__ inline const MegaTensorMaps& gemm_maps(const MegaTensorMaps& m) { return m; }
__host__ __device__ inline const MegaTensorMaps& gemm_maps(const MegaRankMaps& m) { return m.gemm; }
__host__ __device__ inline const CUtensorMap* code_maps(const MegaTensorMaps&) { return nullptr; }
__host__ __device__ inline const CUtensorMap* code_maps(const MegaRankMaps& m) { return &m.l1_codes; }

struct MegaParams {
  layout::MegaLayout ws;    // this rank's workspace (local base); peers' copies through sym.map
  comm::SymBuffer sym;      // the workspace's symmetric buffer (same offsets as ws on every rank)
  layout::WaitContext ctx;  // bounded waits: records go to the Communicator's error area
  int num_tokens = 0;       // this rank's tokens T (<= T_max); inputs already in ws (x, scales, topk)
  int wave_l1_tiles = 0;    // plan::MegaPlan::wave_l1_tiles (the scheduler's wave rule)
  // This rank's experts (MoeRankWeights): only the block scales are read directly, the FP8 tiles come through the
  // tensor maps. w1_scales: transformed (gate, up) pairs [El, I/128, H/128, 2]; w2_scales [El, H/128, I/128].
  const float* w1_scales = nullptr;
  const float* w2_scales = nullptr;
  float clamp = 0.f;               // SwiGLU clamp (<= 0: off)
  uint16_t* y = nullptr;           // bf16 [T, H]
  int32_t* recv_counts = nullptr;  // optional [El]: (token, expert) pairs received per local expert this call
  symmoe::kernel::InputError* input_error = nullptr;  // host-mapped record of this rank's first bad routing entry
  unsigned long long* trace = nullptr;  // optional [gridDim.x][kTraceWordsPerCta] (trace_format.hpp), zeroed
  // The GEMM core's parameters of the two phases (only what math.cuh and epilogue_swiglu.cuh read), filled by
  // make_phase_params. NOTES: kept in the kernel's parameter space (__grid_constant__) rather than built in
  // registers: two copies live across the math loop cost ~50 registers and spilled.
  gemm::kernel::GemmParams l1, l2;
};

// L1: A = L1 pool [P, H], B = W1 [El, 2I, H], out = L2 pool (e4m3 [P, I], scales [I/128, P], top-k weight per pool
// row). L2: A = L2 pool [P, I], B = W2 [El, H, I]; its epilogue writes back to the source ranks (epilogue.cuh).
inline gemm::kernel::GemmParams make_phase_params(const MegaParams& p, bool l2) {
  const layout::MegaDims& d = p.ws.dims();
  gemm::kernel::GemmParams g;
  g.num_experts = d.num_local_experts();
  g.n = l2 ? d.hidden : 2 * d.intermediate;
  g.k = l2 ? d.intermediate : d.hidden;
  g.num_rows_total = int(p.ws.num_pool_rows());
  g.sfb = l2 ? p.w2_scales : p.w1_scales;
  if (!l2) {
    g.out = p.ws.get_l2_pool_x(0);
    g.out_scales = p.ws.get_l2_pool_scale(0, 0);
    g.out_scale_stride = int(p.ws.num_pool_rows());
    g.row_weights = p.ws.get_l1_pool_weight(0);
    g.clamp = p.clamp;
  }
  return g;
}

}  // namespace symmoe::mega::kernel
