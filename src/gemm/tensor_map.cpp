#include "gemm/tensor_map.hpp"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "kernels/gemm/fp4_word_layout.hpp"
#include "symmoe/cuda_check.hpp"

namespace symmoe::gemm {

namespace {
PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult query{};
    SYMMOE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &query));
    SYMMOE_CHECK(query == cudaDriverEntryPointSuccess && p, "gemm",
                 "driver entry point cuTensorMapEncodeTiled not found (query result ", int(query), ")");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}
}  // namespace

CUtensorMap make_tensor_map_2d(const void* base, CUtensorMapDataType dtype, int elem_bytes, uint64_t inner,
                               uint64_t outer, uint64_t row_stride_bytes, uint32_t box_inner, uint32_t box_outer,
                               bool swizzle_128b, const char* what) {
  SYMMOE_CHECK(reinterpret_cast<uintptr_t>(base) % 16 == 0, "gemm", what, ": base address must be 16-byte aligned");
  SYMMOE_CHECK(row_stride_bytes % 16 == 0, "gemm", what, ": row stride must be a multiple of 16 bytes, got ",
               row_stride_bytes);
  SYMMOE_CHECK(!swizzle_128b || box_inner * elem_bytes == 128, "gemm", what, ": 128B swizzle needs 128-byte box rows");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {row_stride_bytes};
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r =
      encode_fn()(&map, dtype, 2, const_cast<void*>(base), dims, strides, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle_128b ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  SYMMOE_CHECK(r == CUDA_SUCCESS, "gemm", what, ": cuTensorMapEncodeTiled failed with CUresult ", int(r), " (dims ",
               inner, " x ", outer, ", box ", box_inner, " x ", box_outer, ")");
  return map;
}

CUtensorMap make_fp4_weight_map(const void* base, uint64_t k, uint64_t weight_rows, uint32_t box_rows,
                                const char* what) {
  return make_tensor_map_2d(base, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, k, weight_rows / 2, k, kernel::kFp4PairBytes,
                            box_rows / 2, false, what);
}

}  // namespace symmoe::gemm
