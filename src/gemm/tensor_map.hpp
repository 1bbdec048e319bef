// 2-D TMA descriptors (CUtensorMap) built through the driver entry point fetched at run time
// (cudaGetDriverEntryPointByVersion), so the library never links libcuda (CI machines have no driver).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace symmoe::gemm {

// Tensor [outer, inner] of `elem_bytes`-byte elements, rows `row_stride_bytes` apart; box [box_outer, box_inner].
// swizzle_128b: the K-major operand layout WGMMA reads (box_inner * elem_bytes must be 128).
CUtensorMap make_tensor_map_2d(const void* base, CUtensorMapDataType dtype, int elem_bytes, uint64_t inner,
                               uint64_t outer, uint64_t row_stride_bytes, uint32_t box_inner, uint32_t box_outer,
                               bool swizzle_128b, const char* what);

// FP4 weights (src/kernels/gemm/fp4_word_layout.hpp, rows in pairs): weight_rows rows of k E2M1 elements as
// [weight_rows / 2 pairs, k bytes], boxes of one K block of box_rows / 2 pairs (128 B x box_rows / 2), unswizzled;
// a kernel loads K block kb of the tile at weight row r from fp4_tma_coords(kb, r).
CUtensorMap make_fp4_weight_map(const void* base, uint64_t k, uint64_t weight_rows, uint32_t box_rows,
                                const char* what);

}  // namespace symmoe::gemm
