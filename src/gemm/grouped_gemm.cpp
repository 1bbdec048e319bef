// Host side of the grouped GEMM: argument checks, the launch plan, tensor maps, launch.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <tuple>

#include "common/nvtx.hpp"
#include "gemm/tensor_map.hpp"
#include "kernels/gemm/launch.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/gemm.hpp"
#include "plan/gemm_kernels.hpp"
#include "symmoe/plan.hpp"

namespace symmoe::gemm {

namespace {

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

struct Launch {
  plan::GemmPlan plan;
  plan::GemmKernelShape kernel;
  int num_ctas = 0;
};

// The SYMMOE_ planner overrides, read from the environment once per process (not per call).
const plan::PlanOverrides& overrides_once() {
  static const plan::PlanOverrides overrides = plan::PlanOverrides::from_env();
  return overrides;
}

// SMs of the current device, queried once per device.
int device_sm_count() {
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  static int sms[kMaxDevices];
  int device = 0;
  SYMMOE_CUDA_CHECK(cudaGetDevice(&device));
  SYMMOE_CHECK(device >= 0 && device < kMaxDevices, "gemm", "device ordinal ", device, " over ", kMaxDevices);
  std::call_once(once[device], [&] {
    SYMMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms[device], cudaDevAttrMultiProcessorCount, device));
  });
  return sms[device];
}

// Plans already made, by everything a plan depends on (the overrides are fixed per process): a repeated call with
// the same problem reuses its plan instead of running the planner again. Bounded: callers whose hint changes with
// every batch size start over after kMaxCachedPlans distinct problems.
constexpr size_t kMaxCachedPlans = 4096;
using PlanKey = std::tuple<double, int, int, int, int, bool, int, int, int, bool, int, int>;
std::mutex plan_cache_mutex;
std::map<PlanKey, Launch> plan_cache;

// The launch is the planner's choice (plan::plan_grouped_gemm over the compiled kernels plan::kGemmKernels), with
// LaunchOptions' block_m / block_n / tile_buffer / cluster_size / core as pins. Expected rows per expert: the caller's
// hint, else num_rows / E (contiguous: the padded average); masked: max_m already bounds every expert (the caller sized
// it with the imbalance headroom), so the planner gets max_m / kImbalanceFactor and a 64-row max_m keeps 64-row tiles.
Launch plan_launch(const GroupedGemmInput& in, bool swiglu, const LaunchOptions& opt) {
  const double expected = opt.expected_rows_per_expert > 0    ? double(opt.expected_rows_per_expert)
                          : in.layout == GroupLayout::kMasked ? double(in.num_rows) / plan::kImbalanceFactor
                                                              : double(in.num_rows) / in.num_experts;
  const int num_sms = opt.num_sms > 0 ? opt.num_sms : device_sm_count();
  const bool fp4 = in.weights == WeightFormat::kFp4;
  const PlanKey key{expected,         in.n,        in.k,        in.num_experts,  num_sms,
                    swiglu,           opt.block_m, opt.block_n, opt.tile_buffer, fp4,
                    opt.cluster_size, opt.core};
  {
    std::lock_guard<std::mutex> lock(plan_cache_mutex);
    const auto it = plan_cache.find(key);
    if (it != plan_cache.end()) return it->second;
  }
  plan::GemmPins pins;
  pins.block_m = opt.block_m, pins.block_n = opt.block_n, pins.tile_buffer = opt.tile_buffer;
  pins.cluster_size = opt.cluster_size, pins.core = opt.core;
  Launch launch;
  launch.plan =
      plan::plan_grouped_gemm(expected, in.n, in.k, in.num_experts, num_sms,
                              swiglu ? plan::GemmEpilogue::kSwigluFp8 : plan::GemmEpilogue::kBf16, overrides_once(),
                              pins, fp4 ? plan::GemmWeights::kFp4 : plan::GemmWeights::kFp8);
  const plan::GemmPlan& p = launch.plan;
  launch.kernel = plan::GemmKernelShape{p.block_m,  p.block_n,     p.num_stages, p.cluster_size,
                                        p.epilogue, p.tile_buffer, p.weights,    p.core};
  launch.num_ctas = p.num_sms;
  std::lock_guard<std::mutex> lock(plan_cache_mutex);
  if (plan_cache.size() >= kMaxCachedPlans) plan_cache.clear();
  plan_cache.emplace(key, launch);
  return launch;
}

kernel::GemmParams make_params(const GroupedGemmInput& in) {
  kernel::GemmParams p;
  p.num_experts = in.num_experts;
  p.n = in.n;
  p.k = in.k;
  p.num_rows_total = in.num_total_rows();
  p.segment_starts = in.segment_starts;
  p.num_valid_rows = in.num_valid_rows;
  p.max_m = in.layout == GroupLayout::kMasked ? in.num_rows : 0;
  p.sfb = in.sfb;
  return p;
}

void launch(const GroupedGemmInput& in, const kernel::GemmParams& params, const Launch& l, cudaStream_t stream) {
  const plan::GemmKernelShape& c = l.kernel;
  const uint64_t rows = uint64_t(in.num_total_rows());
  const uint64_t weight_rows = uint64_t(in.num_experts) * in.n;
  kernel::GemmTensorMaps maps{};
  maps.a = make_tensor_map_2d(in.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, in.k, rows, in.k, 128, c.block_m, true, "a");
  maps.sfa = make_tensor_map_2d(in.sfa, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, rows, in.k / 128,
                                uint64_t(in.sfa_stride) * 4, c.block_m + kernel::kSfaBoxPad, 1, false, "sfa");
  if (in.weights == WeightFormat::kFp4) {
    // Row pairs (fp4_word_layout.hpp), boxes of one K block x block_n rows, unswizzled (the kernels read them with
    // ld.shared); the codes' boxes are the tile's block_n words of one K block.
    maps.b = make_fp4_weight_map(in.b, in.k, weight_rows, c.block_n, "b (fp4)");
    maps.b_codes = make_tensor_map_2d(in.b_scale_codes, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, in.n,
                                      uint64_t(in.num_experts) * (in.k / 128), uint64_t(in.n) * 4, c.block_n, 1, false,
                                      "b_scale_codes");
  } else {
    maps.b = make_tensor_map_2d(in.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, in.k, weight_rows, in.k, 128,
                                c.block_n / c.cluster_size, true, "b");
  }
  // The one-batch core stores its output with TMA through maps.d, 128B-swizzled boxes of 128 bytes x one warpgroup's
  // rows: bf16 D [rows, n] (64 columns a box) or the SwiGLU kernel's e4m3 out [rows, n / 2] (the tile's 128
  // channels). The other cores store without a map.
  if (c.core == plan::GemmCore::kOneBatch) {
    if (c.epilogue == plan::GemmEpilogue::kSwigluFp8)
      maps.d = make_tensor_map_2d(params.out, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, in.n / 2, rows, uint64_t(in.n) / 2, 128,
                                  plan::kGemmCoreStoreBoxRows, true, "out");
    else
      maps.d = make_tensor_map_2d(params.d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, in.n, rows, uint64_t(in.n) * 2, 64,
                                  plan::kGemmCoreStoreBoxRows, true, "d");
  }
  kernel::launch_grouped_gemm(c, params, maps, l.num_ctas, stream);
}

}  // namespace

void check_input(const GroupedGemmInput& in, bool swiglu_tile) {
  SYMMOE_CHECK(in.num_experts > 0, "gemm", "num_experts must be > 0, got ", in.num_experts);
  const int n_align = swiglu_tile ? 256 : 128;
  SYMMOE_CHECK(in.n > 0 && in.n % n_align == 0, "gemm", "n must be a positive multiple of ", n_align, ", got ", in.n);
  SYMMOE_CHECK(in.k > 0 && in.k % 128 == 0, "gemm", "k must be a positive multiple of 128, got ", in.k);
  SYMMOE_CHECK(in.num_rows >= 0, "gemm", "num_rows must be >= 0, got ", in.num_rows);
  if (in.layout == GroupLayout::kContiguous) {
    SYMMOE_CHECK(in.segment_starts, "gemm", "segment_starts is required for the contiguous layout");
  } else {
    SYMMOE_CHECK(in.num_valid_rows, "gemm", "num_valid_rows (per-expert counts) is required for the masked layout");
    SYMMOE_CHECK(in.num_rows > 0, "gemm", "num_rows (max_m) must be > 0 for the masked layout, got ", in.num_rows);
  }
  SYMMOE_CHECK(in.a && aligned(in.a, 16), "gemm", "a must be a non-null 16-byte aligned device pointer");
  SYMMOE_CHECK(in.sfa && aligned(in.sfa, 16), "gemm", "sfa must be a non-null 16-byte aligned device pointer");
  SYMMOE_CHECK(in.b && aligned(in.b, 16), "gemm", "b must be a non-null 16-byte aligned device pointer");
  SYMMOE_CHECK(in.sfb && aligned(in.sfb, swiglu_tile ? 8 : 4), "gemm", "sfb must be a non-null aligned device pointer");
  if (in.weights == WeightFormat::kFp4) {
    SYMMOE_CHECK(in.b_scale_codes && aligned(in.b_scale_codes, 16), "gemm",
                 "b_scale_codes must be a non-null 16-byte aligned device pointer for FP4 weights (int32 [E, k/128, n]"
                 " UE8M0 codes, transform_l*_weights_fp4)");
  } else {
    SYMMOE_CHECK(in.weights == WeightFormat::kFp8, "gemm", "weights must be kFp8 or kFp4, got ", int(in.weights));
    SYMMOE_CHECK(!in.b_scale_codes, "gemm",
                 "b_scale_codes is set but weights is kFp8: FP4 weights need weights = WeightFormat::kFp4");
  }
  SYMMOE_CHECK(in.sfa_stride >= in.num_total_rows() && in.sfa_stride % 4 == 0, "gemm",
               "sfa_stride must be a multiple of 4 and >= num_total_rows ", in.num_total_rows(), ", got ",
               in.sfa_stride);
}

void check_output(const GroupedGemmInput& in, const SwigluFp8Output& out) {
  SYMMOE_CHECK(out.out && aligned(out.out, 16), "gemm", "out must be a non-null 16-byte aligned device pointer");
  SYMMOE_CHECK(out.out_scales, "gemm", "out_scales must be a non-null device pointer");
  SYMMOE_CHECK(out.row_weights, "gemm", "row_weights must be a non-null device pointer");
  SYMMOE_CHECK(out.out_scale_stride >= in.num_total_rows(), "gemm", "out_scale_stride must be >= num_total_rows ",
               in.num_total_rows(), ", got ", out.out_scale_stride);
}

void grouped_gemm_bf16(const GroupedGemmInput& in, uint16_t* d, cudaStream_t stream, const LaunchOptions& opt) {
  SYMMOE_NVTX_RANGE("gemm.grouped_bf16");
  check_input(in, false);
  SYMMOE_CHECK(d && aligned(d, 16), "gemm", "d must be a non-null 16-byte aligned device pointer");
  if (in.num_total_rows() == 0) return;
  kernel::GemmParams params = make_params(in);
  params.d = d;
  launch(in, params, plan_launch(in, false, opt), stream);
}

void grouped_gemm_swiglu_fp8(const GroupedGemmInput& in, const SwigluFp8Output& out, cudaStream_t stream,
                             const LaunchOptions& opt) {
  SYMMOE_NVTX_RANGE("gemm.grouped_swiglu_fp8");
  check_input(in, true);
  check_output(in, out);
  if (in.num_total_rows() == 0) return;
  kernel::GemmParams params = make_params(in);
  params.out = out.out;
  params.out_scales = out.out_scales;
  params.out_scale_stride = out.out_scale_stride;
  params.row_weights = out.row_weights;
  params.clamp = out.clamp;
  launch(in, params, plan_launch(in, true, opt), stream);
}

std::string describe_launch(const GroupedGemmInput& in, bool swiglu, const LaunchOptions& opt) {
  const Launch l = plan_launch(in, swiglu, opt);
  return kernel::kernel_name(l.kernel) + " x " + std::to_string(l.num_ctas) + " CTAs";
}

}  // namespace symmoe::gemm
